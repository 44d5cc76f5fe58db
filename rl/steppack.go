package rl

import (
	"fmt"
	"math"
	"slices"
)

// Packing step-mode trajectories. Each turn is a sample (its prompt, then
// its response with action mask 1). A turn whose prompt extends the
// sequence being built, the previous turn's prompt and response, token for
// token, and adds at least one token (the observation) joins that sequence:
// the tokens it adds go in with mask 0 and its response after them. The
// merged sequence is what the separate samples would have been, each
// response seeing the same context, without re-encoding the shared prefix
// once per turn (O(T) tokens instead of O(T²)). A rewritten prompt starts
// a sequence of its own. Under the full context policy every turn merges,
// and the batch is the one whole mode packs.
//
// Batch.Traj then names each sequence's trajectory; the sequences of one
// trajectory are consecutive and in turn order, and its turns are the runs
// of action tokens over them, in order (a response is never empty and a
// merged turn always adds a token between two responses, so runs and turns
// are one to one).

// StepPacking counts what FromSteps merged, for the step's metrics.
type StepPacking struct {
	Turns  int // turn samples packed
	Merged int // of them, joined to the previous turn's sequence
	Seqs   int // packed sequences
	// Trajs is each trajectory's sequences [Trajs[i], Trajs[i+1]).
	Trajs []int
}

// MergeRate is the share of the turns after each trajectory's first that
// were merged into their predecessor's sequence (1 under the full context
// policy; 0 with merging off).
func (p StepPacking) MergeRate() float64 {
	later := p.Turns - (len(p.Trajs) - 1)
	if later <= 0 {
		return 0
	}
	return float64(p.Merged) / float64(later)
}

// FromSteps packs step-mode trajectories (Trajectory.Steps) into a Batch
// with Tokens, Offsets, PromptLen, Group, Traj, ActionMask, AdvantageMask
// and SampleLogProb; merge joins prefix-extending turns as described
// above. advantageMask is FromTrajectories'.
func FromSteps(trajs []*Trajectory, advantageMask, merge bool) (*Batch, StepPacking, error) {
	b := &Batch{Offsets: []int{0}}
	p := StepPacking{Trajs: []int{0}}
	for i, tr := range trajs {
		if len(tr.Steps) == 0 {
			return nil, p, fmt.Errorf("rl: trajectory %d (%s) has no turn samples: it was not rolled out with rollout.trajectory=step", i, tr.Sample.ID)
		}
		start := len(b.Tokens) // the open sequence's first token
		for k, st := range tr.Steps {
			if len(st.Response) == 0 || len(st.LogProb) != len(st.Response) {
				return nil, p, fmt.Errorf("rl: trajectory %d turn %d has %d response tokens and %d log-probs", i, k, len(st.Response), len(st.LogProb))
			}
			open := b.Tokens[start:]
			if k > 0 && merge && len(st.Prompt) > len(open) && slices.Equal(st.Prompt[:len(open)], open) {
				add := st.Prompt[len(open):]
				b.Tokens = append(b.Tokens, add...)
				b.ActionMask = append(b.ActionMask, make([]bool, len(add))...)
				b.SampleLogProb = append(b.SampleLogProb, make([]float64, len(add))...)
				p.Merged++
			} else {
				if k > 0 {
					b.Offsets = append(b.Offsets, len(b.Tokens))
					start = len(b.Tokens)
				}
				b.PromptLen = append(b.PromptLen, len(st.Prompt))
				b.Group = append(b.Group, tr.Group)
				b.Traj = append(b.Traj, i)
				b.Tokens = append(b.Tokens, st.Prompt...)
				b.ActionMask = append(b.ActionMask, make([]bool, len(st.Prompt))...)
				b.SampleLogProb = append(b.SampleLogProb, make([]float64, len(st.Prompt))...)
			}
			b.Tokens = append(b.Tokens, st.Response...)
			for _, lp := range st.LogProb {
				b.ActionMask = append(b.ActionMask, true)
				b.SampleLogProb = append(b.SampleLogProb, float64(lp))
			}
			p.Turns++
		}
		b.Offsets = append(b.Offsets, len(b.Tokens))
		p.Trajs = append(p.Trajs, len(b.Offsets)-1)
	}
	p.Seqs = b.NumSeqs()
	if advantageMask {
		b.AdvantageMask = b.ActionMask
	} else {
		m, err := b.ResponseMask()
		if err != nil {
			return nil, p, err
		}
		b.AdvantageMask = m
	}
	return b, p, nil
}

// OutcomePerSeq places each trajectory's outcome on its last sequence (0
// on the others), as AddOutcome's per-sequence scores: the outcome is the
// reward of the last turn.
func (p StepPacking) OutcomePerSeq(outcomes []float64) []float64 {
	out := make([]float64, p.Seqs)
	for i, o := range outcomes {
		out[p.Trajs[i+1]-1] = o
	}
	return out
}

// PerSeq spreads one value per trajectory over its sequences.
func (p StepPacking) PerSeq(v []float64) []float64 {
	out := make([]float64, p.Seqs)
	for i, x := range v {
		for j := p.Trajs[i]; j < p.Trajs[i+1]; j++ {
			out[j] = x
		}
	}
	return out
}

// AddTurnRewards adds per-turn process rewards to Scores: rewards[j][k]
// lands on the last action token of turn k of trajectory j, the k-th run
// of action tokens over the trajectory's sequences (Batch.Traj; each
// sequence its own trajectory when Traj is nil). It places a reward by
// turn rather than by a tool-call token, so a turn the length limit cut
// keeps its reward. primeNorm is AddProcessRewards' normalisation, with the
// reverse cumulative sum running over a trajectory's sequences in order.
func AddTurnRewards(b *Batch, rewards [][]float64, primeNorm bool) error {
	if err := b.Validate(FieldActionMask); err != nil {
		return err
	}
	tab, err := b.steps()
	if err != nil {
		return err
	}
	if len(rewards) != len(tab) {
		return fmt.Errorf("rl: process rewards for %d trajectories, the batch has %d", len(rewards), len(tab))
	}
	proc := make([]float64, b.NumTokens())
	for j, rs := range rewards {
		if len(rs) > len(tab[j]) {
			return fmt.Errorf("rl: trajectory %d has %d process rewards for %d turns", j, len(rs), len(tab[j]))
		}
		for k, r := range rs {
			if math.IsNaN(r) || math.IsInf(r, 0) {
				return fmt.Errorf("rl: process reward %d of trajectory %d is %v", k, j, r)
			}
			proc[tab[j][k].last] += r
		}
	}
	var peak float64
	if primeNorm {
		for _, st := range tab {
			var c float64
			for k := len(st) - 1; k >= 0; k-- {
				c += proc[st[k].last]
				peak = max(peak, math.Abs(c))
			}
		}
	}
	return b.addProcess(proc, primeNorm, peak)
}

// miniBatches cuts sequences [0, S) into mini-batches of size
// trajectories each (the last may hold fewer) and returns the boundaries:
// mini-batch j is sequences [cuts[j], cuts[j+1]). A trajectory's sequences
// stay in one mini-batch, so ppo_mini_batch_size counts trajectories in
// step mode as in whole mode, where every sequence is a trajectory.
func miniBatches(b *Batch, size int) []int {
	S := b.NumSeqs()
	cuts := []int{0}
	if b.Traj == nil {
		for lo := size; lo < S; lo += size {
			cuts = append(cuts, lo)
		}
		return append(cuts, S)
	}
	n := 1
	for i := 1; i < S; i++ {
		if b.Traj[i] == b.Traj[i-1] {
			continue
		}
		if n == size {
			cuts = append(cuts, i)
			n = 0
		}
		n++
	}
	return append(cuts, S)
}

// scoreSteps is score in step mode: the turns packed by FromSteps, the
// outcome on each trajectory's last turn, process rewards on each turn's
// last token, and the packing's metrics (in data parallel, of this
// process's trajectories).
func (t *Trainer) scoreSteps(trajs []*Trajectory, baseline []float64, m Metrics) (*Batch, error) {
	cfg := &t.Cfg
	b, p, err := FromSteps(trajs, cfg.Algorithm.AdvantageMask, cfg.Rollout.MergePrefix)
	if err != nil {
		return nil, err
	}
	if baseline != nil {
		b.BaselineScore = p.PerSeq(baseline)
	}
	outcomes := make([]float64, len(trajs))
	for i, tr := range trajs {
		outcomes[i] = cfg.Rollout.outcome(tr)
	}
	if err := AddOutcome(b, p.OutcomePerSeq(outcomes)); err != nil {
		return nil, err
	}
	if cfg.Algorithm.ProcessReward {
		rs := make([][]float64, len(trajs))
		for i, tr := range trajs {
			rs[i] = tr.ProcessRewards
		}
		if err := AddTurnRewards(b, rs, cfg.Algorithm.PrimeNorm); err != nil {
			return nil, err
		}
	}
	m["rollout/merge_rate"] = p.MergeRate()
	m["rollout/turn_samples"] = float64(p.Turns)
	m["rollout/sequences"] = float64(p.Seqs)
	return b, nil
}
