package rl

import (
	"fmt"
	"math"
)

// AddOutcome adds each sequence's outcome score to Scores on its last action
// token (Agent-R1 writes it on the last valid response token, which is the
// final answer's last generated token). Scores is allocated if nil. A
// non-zero score for a sequence without an action token is an error naming
// the sequence: its reward would otherwise be lost.
func AddOutcome(b *Batch, scores []float64) error {
	if err := b.Validate(FieldActionMask); err != nil {
		return err
	}
	if len(scores) != b.NumSeqs() {
		return fmt.Errorf("rl: %d outcome scores for %d sequences", len(scores), b.NumSeqs())
	}
	if b.Scores == nil {
		b.Scores = make([]float64, b.NumTokens())
	} else if err := b.require(FieldScores); err != nil {
		return err
	}
	for i, sc := range scores {
		if math.IsNaN(sc) || math.IsInf(sc, 0) {
			return fmt.Errorf("rl: outcome score of sequence %d is %v", i, sc)
		}
		s, e := b.Seq(i)
		last := -1
		for t := e - 1; t >= s; t-- {
			if b.ActionMask[t] {
				last = t
				break
			}
		}
		if last < 0 {
			if sc == 0 {
				continue // nothing to place, nothing lost
			}
			return fmt.Errorf("rl: sequence %d has no action token to carry its outcome score %v", i, sc)
		}
		b.Scores[last] += sc
	}
	return nil
}

// primeEps is Agent-R1's epsilon in the PRIME-style normalisation.
const primeEps = 1e-6

// AddProcessRewards adds per-tool-call process rewards to Scores: rewards[i][k]
// lands on the token that ends the k-th tool call of sequence i, the k-th
// action token equal to toolCallEnd (Qwen2.5's "</tool_call>" is 151658, the
// rollout's stop token, so it is the model's own last token of that turn).
// With primeNorm, the process rewards are first divided by (the largest
// |reverse cumulative sum| of any sequence's process rewards in the batch +
// 1e-6), as Agent-R1's prime_norm does, so that their returns stay within
// [−1, 1]. Scores is allocated if nil.
func AddProcessRewards(b *Batch, toolCallEnd int32, rewards [][]float64, primeNorm bool) error {
	if err := b.Validate(FieldActionMask); err != nil {
		return err
	}
	if b.Tokens == nil {
		return fmt.Errorf("rl: AddProcessRewards needs Tokens to find the tool calls")
	}
	if len(rewards) != b.NumSeqs() {
		return fmt.Errorf("rl: process rewards for %d sequences, the batch has %d", len(rewards), b.NumSeqs())
	}
	proc := make([]float64, b.NumTokens())
	for i, rs := range rewards {
		s, e := b.Seq(i)
		k := 0
		for t := s; t < e && k < len(rs); t++ {
			if b.ActionMask[t] && b.Tokens[t] == toolCallEnd {
				if r := rs[k]; math.IsNaN(r) || math.IsInf(r, 0) {
					return fmt.Errorf("rl: process reward %d of sequence %d is %v", k, i, r)
				}
				proc[t] += rs[k]
				k++
			}
		}
		if k < len(rs) {
			return fmt.Errorf("rl: sequence %d has %d process rewards but only %d tool calls ending in token %d", i, len(rs), k, toolCallEnd)
		}
	}
	var peak float64
	if primeNorm {
		for i := 0; i < b.NumSeqs(); i++ {
			s, e := b.Seq(i)
			var c float64
			for t := e - 1; t >= s; t-- {
				c += proc[t]
				peak = max(peak, math.Abs(c))
			}
		}
	}
	return b.addProcess(proc, primeNorm, peak)
}

// addProcess adds the per-token process rewards proc to Scores (proc
// becomes Scores when it is nil), divided first, with primeNorm, by peak,
// the largest |reverse cumulative sum| of any trajectory's process rewards,
// + 1e-6.
func (b *Batch) addProcess(proc []float64, primeNorm bool, peak float64) error {
	if primeNorm {
		for t := range proc {
			proc[t] /= peak + primeEps
		}
	}
	if b.Scores == nil {
		b.Scores = proc
		return nil
	}
	if err := b.require(FieldScores); err != nil {
		return err
	}
	for t, v := range proc {
		b.Scores[t] += v
	}
	return nil
}
