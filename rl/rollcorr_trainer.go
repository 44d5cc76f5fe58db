package rl

import (
	"fmt"
	"math"
)

func init() {
	RegisterLoss("bypass_reinforce", BypassReinforceLoss)
}

// The trainer's side of rollout correction. Each step measures the
// mismatch (rollcorr_metrics.go) between the sampler's log-probs and the
// trainer's own of the same tokens under the same weights, from whichever
// copy of the latter the step has:
//
//   - π_old recomputed (several mini-batches or epochs, a KL in the reward,
//     or a correction that needs it): on the global batch before the update;
//   - π_old taken from the update's forward (one epoch of one mini-batch,
//     Trainer.reuseOld) and bypass mode: each micro-batch's own log-probs
//     are recorded the first time its sequences are seen (the weights have
//     not moved yet on the first mini-batch; later mini-batches in bypass
//     mode include the earlier updates' drift, as verl's actor-side figures
//     do), gathered over the ranks, and measured after the update.
//
// Corrections in decoupled mode (bypass_mode false) need π_old before the
// update, so turning one on makes the trainer recompute it; the weights
// scale the global batch's advantages and the rejection clears its action
// mask for the actor update only (the critic, the data metrics and the
// rollout dump see the batch as it was). Bypass mode corrects micro-batch by
// micro-batch against the update's own log-probs, as verl's bypass loss does.

// rollcorrStep is one step's rollout-correction state.
type rollcorrStep struct {
	base *Batch    // the step's (global) batch, as the update slices it
	seen []float64 // [N] the update's own log-probs, NaN until recorded; nil when π_old was recomputed
}

// rollcorrBypass puts the sampler's log-probs in π_old in bypass mode, so
// that the old-log-prob forward pass is skipped; it says whether it did.
func (t *Trainer) rollcorrBypass(b *Batch) bool {
	if !t.Cfg.Algorithm.RolloutCorrection.BypassMode {
		return false
	}
	b.OldLogProb = b.SampleLogProb
	return true
}

// rollcorrNeedsOld says whether a decoupled-mode correction needs π_old
// recomputed before the update.
func (c *TrainerConfig) rollcorrNeedsOld() bool {
	rc := &c.Algorithm.RolloutCorrection
	return rc.active() && !rc.BypassMode
}

// rollcorrValidate reports a rollout correction that contradicts the
// policy loss: the decoupled loss already weights each token by the
// sampler-to-π_old ratio (importance weights would count it twice), and
// its proximal policy is the recomputed π_old, which bypass mode replaces
// by the sampler (every weight would be 1).
func (c *TrainerConfig) rollcorrValidate() error {
	rc := &c.Algorithm.RolloutCorrection
	if c.Actor.PolicyLoss != "decoupled" || (rc.BypassMode && rc.LossType == "reinforce") {
		return nil // bypass mode's reinforce loss replaces the policy loss
	}
	if rc.IS != "" {
		return fmt.Errorf("actor.policy_loss decoupled already weights by the sampler's ratio: unset algorithm.rollout_correction.rollout_is (%q)", rc.IS)
	}
	if rc.BypassMode {
		return fmt.Errorf("actor.policy_loss decoupled needs the recomputed pi_old as its proximal policy: algorithm.rollout_correction.bypass_mode replaces it with the sampler's")
	}
	return nil
}

// rollcorrLossConfig is the actor's loss config: bypass mode's reinforce
// loss replaces the policy loss.
func (t *Trainer) rollcorrLossConfig() *LossConfig {
	rc := &t.Cfg.Algorithm.RolloutCorrection
	if rc.BypassMode && rc.LossType == "reinforce" {
		lc := t.Cfg.Actor.LossConfig
		lc.PolicyLoss = "bypass_reinforce"
		return &lc
	}
	return &t.Cfg.Actor.LossConfig
}

// rollcorrBegin runs before the actor update on the step's global batch b:
// it measures the mismatch when π_old was recomputed, applies a
// decoupled-mode correction to b, and returns what undoes it.
func (t *Trainer) rollcorrBegin(b *Batch, m Metrics) (undo func(), err error) {
	rc := &t.Cfg.Algorithm.RolloutCorrection
	t.rc = &rollcorrStep{base: b}
	undo = func() {}
	if b.OldLogProb == nil || rc.BypassMode {
		t.rc.seen = make([]float64, b.NumTokens())
		for k := range t.rc.seen {
			t.rc.seen[k] = math.NaN()
		}
		return undo, nil
	}
	if err := rollcorrMeasure(b, b.OldLogProb, m); err != nil {
		return undo, err
	}
	if !rc.active() {
		return undo, nil
	}
	c, err := RolloutCorrection(rc, b.Offsets, b.ActionMask, b.SampleLogProb, b.OldLogProb)
	if err != nil {
		return undo, err
	}
	for k, v := range c.Metrics {
		m[k] = v
	}
	adv, mask := b.Advantages, b.ActionMask
	applyCorrection(b, c)
	return func() { b.Advantages, b.ActionMask = adv, mask }, nil
}

// applyCorrection scales b's advantages by the weights and clears the
// rejected tokens' action mask, in fresh slices (b's may be shared).
func applyCorrection(b *Batch, c *Correction) {
	if c.Weights != nil {
		adv := make([]float64, len(b.Advantages))
		for k, a := range b.Advantages {
			if b.ActionMask[k] {
				adv[k] = a * c.Weights[k]
			}
		}
		b.Advantages = adv
	}
	if c.Keep != nil {
		b.ActionMask = c.Keep
	}
}

// rollcorrMicro runs on each actor micro-batch mb after its forward: it
// records the update's own log-probs when the step measures from them,
// and in bypass mode returns mb with its weights and rejection applied
// (a copy; mb's slices are the mini-batch's) and their metrics.
func (t *Trainer) rollcorrMicro(mb *Batch) (*Batch, Metrics, error) {
	s := t.rc
	if s == nil {
		return mb, nil, nil
	}
	if s.seen != nil && mb.NumTokens() > 0 {
		pos := cap(s.base.ActionMask) - cap(mb.ActionMask)
		if pos < 0 || pos+mb.NumTokens() > len(s.seen) || &s.base.ActionMask[pos] != &mb.ActionMask[0] {
			return nil, nil, fmt.Errorf("rl: rollout correction: a micro-batch that is not a slice of the step's batch")
		}
		for k, v := range mb.LogProb {
			if math.IsNaN(s.seen[pos+k]) {
				s.seen[pos+k] = v
			}
		}
	}
	rc := &t.Cfg.Algorithm.RolloutCorrection
	if !rc.BypassMode || !rc.active() {
		return mb, nil, nil
	}
	c, err := RolloutCorrection(rc, mb.Offsets, mb.ActionMask, mb.SampleLogProb, mb.LogProb)
	if err != nil {
		return nil, nil, err
	}
	cp := *mb
	if rc.LossType != "reinforce" {
		c.Weights = nil // the ratio π_θ/μ of the PPO loss already carries the correction
	}
	applyCorrection(&cp, c)
	return &cp, c.Metrics, nil
}

// rollcorrRejectedAll says whether a mini-batch has no action token left
// because the rejection took them all, so that its update is skipped.
func (t *Trainer) rollcorrRejectedAll(mini *Batch) bool {
	if t.rc == nil || !t.Cfg.Algorithm.RolloutCorrection.active() {
		return false
	}
	for _, on := range mini.ActionMask {
		if on {
			return false
		}
	}
	return mini.NumTokens() > 0
}

// rollcorrEnd runs after the update: it measures the mismatch from the
// recorded log-probs (gathered over the ranks) when it was not measured
// before, and hands each of this rank's trajectories its per-turn figures.
func (t *Trainer) rollcorrEnd(trajs []*Trajectory, m Metrics) error {
	s := t.rc
	t.rc = nil
	if s == nil {
		return nil
	}
	b := s.base
	train := b.OldLogProb
	if s.seen != nil {
		if err := t.sync().FillRecorded(s.seen); err != nil { // the other processes' sequences
			return err
		}
		for k, on := range b.ActionMask {
			if on && math.IsNaN(s.seen[k]) {
				return nil // the actor did not update (critic warm-up): nothing was measured
			}
		}
		train = s.seen
		if err := rollcorrMeasure(b, train, m); err != nil {
			return err
		}
	}
	turns, err := TurnMismatches(b.Offsets, b.ActionMask, b.SampleLogProb, train)
	if err != nil {
		return err
	}
	if b.Traj != nil {
		return nil // step mode: a trajectory's turns span sequences; the metrics above stand
	}
	first := t.slice.SeqLo // this process's first sequence of the global batch (GatherBatch)
	for i, tr := range trajs {
		if first+i < len(turns) {
			tr.Mismatch = turns[first+i]
		}
	}
	return nil
}

// rollcorrMeasure adds the mismatch metrics of train against b's
// sampling log-probs.
func rollcorrMeasure(b *Batch, train []float64, m Metrics) error {
	mm, err := MismatchMetrics(b.Offsets, b.ActionMask, b.SampleLogProb, train)
	if err != nil {
		return err
	}
	for k, v := range mm {
		m[k] = v
	}
	return nil
}

// BypassReinforceLoss is bypass mode's loss_type reinforce (verl's
// compute_policy_loss_reinforce): per masked token ℓ = −A·log π_θ, so
// dℓ/d log π_θ = −A. The importance weights reach it through the
// advantages (rollcorr.go). Metrics: actor/pg_loss, and actor/ppo_kl, the
// mean of log μ − log π_θ with μ the sampler (π_old in bypass mode).
// Reads LogProb, OldLogProb, Advantages, ActionMask.
func BypassReinforceLoss(b *Batch, cfg *LossConfig, w Weights, out *Output) error {
	if err := b.require(FieldActionMask, FieldLogProb, FieldOldLogProb, FieldAdvantages); err != nil {
		return err
	}
	if err := checkWeights(b, w, out); err != nil {
		return err
	}
	g, add := out.Grad(GradLogProb)
	m, lp, old, adv := b.ActionMask, b.LogProb, b.OldLogProb, b.Advantages
	acc := forChunks(b, 4, func(slo, shi int, acc []float64) {
		var loss, kl, n, bad float64
		for i := slo; i < shi; i++ {
			s, e := b.Seq(i)
			var seq float64
			for t := s; t < e; t++ {
				d := 0.0
				if m[t] {
					chk := lp[t] + adv[t] + old[t]
					bad += chk - chk
					seq -= adv[t] * lp[t]
					kl += old[t] - lp[t]
					n++
					d = -w[i] * adv[t]
				}
				if add {
					g[t] += d
				} else {
					g[t] = d
				}
			}
			loss += w[i] * seq
		}
		acc[0], acc[1], acc[2], acc[3] = loss, kl, n, bad
	})
	if acc[3] != 0 {
		return b.firstNonFiniteMasked(FieldLogProb, FieldOldLogProb, FieldAdvantages)
	}
	out.Loss += acc[0]
	out.Metrics["actor/pg_loss"] = acc[0]
	out.Metrics["actor/ppo_kl"] = acc[1] / (acc[2] + maskEps)
	return nil
}
