package rl

import (
	"fmt"
	"math"
)

// Length budgets. A trajectory meets four, each its own setting, and a cut
// by any of them is visible:
//
//	budget                      setting                        what a cut does
//	one turn                    rollout.max_turn_tokens        the turn ends; without a tool call the trajectory
//	                                                           finishes turn_limit
//	the trajectory              rollout.max_response_tokens    finish length (tokens after the first prompt:
//	                                                           model and environment, the transcript in step mode)
//	one tool response           env.max_tool_response_length   the text is cut with a marker ("...", "(truncated)")
//	                                                           and counted: env/truncated_tool_responses
//	the model's window          model.max_context              finish context (a turn's context in step mode, the
//	                                                           whole trajectory in whole mode)
//
// rollout.max_prompt_tokens bounds the first prompt; a longer one is an
// error when the data is loaded, never a silent cut. The step's metrics
// give the share of each finish reason (env/finish_turn_limit,
// env/finish_length, env/finish_context). A truncated trajectory's reward
// gets rollout.truncation_penalty, and rollout.truncation_loss mask takes
// its tokens out of the loss after the estimator has counted its reward
// (DAPO's overlong filtering), so a cut answer is neither silently
// rewarded nor silently imitated.

// The rollout.truncation_loss settings.
const (
	TruncationKeep = "keep" // train on a truncated trajectory like any other
	TruncationMask = "mask" // take its tokens out of the loss
)

// validateBudgets checks the truncation settings.
func (c *RolloutConfig) validateBudgets() error {
	switch c.TruncationLoss {
	case "", TruncationKeep, TruncationMask:
	default:
		return fmt.Errorf("rl: rollout.truncation_loss %q is neither %s nor %s", c.TruncationLoss, TruncationKeep, TruncationMask)
	}
	if math.IsNaN(c.TruncationPenalty) || math.IsInf(c.TruncationPenalty, 0) {
		return fmt.Errorf("rl: rollout.truncation_penalty %v must be finite", c.TruncationPenalty)
	}
	return nil
}

// outcome is t's outcome reward with the truncation penalty.
func (c *RolloutConfig) outcome(t *Trajectory) float64 {
	r := t.Outcome.Reward
	if c.TruncationPenalty != 0 && t.Finish.Truncated() {
		r += c.TruncationPenalty
	}
	return r
}

// markTruncated records in b.Truncated which of its sequences belong to
// trajectories a length budget ended: the packed batch of trajs, before
// data parallel gathers it.
func markTruncated(b *Batch, trajs []*Trajectory) error {
	of, n, err := b.trajIndex()
	if err != nil {
		return err
	}
	if n != len(trajs) {
		return fmt.Errorf("rl: the batch packs %d trajectories for %d records", n, len(trajs))
	}
	b.Truncated = make([]bool, len(of))
	for i, j := range of {
		b.Truncated[i] = trajs[j].Finish.Truncated()
	}
	return nil
}

// maskTruncated takes the tokens of truncated trajectories (b.Truncated)
// out of the loss (rollout.truncation_loss mask): ActionMask false on
// every token of their sequences, after the estimator, so the group
// statistics still count their rewards. It leaves the batch as it is when
// that would leave no token to train, and returns how many trajectories
// it masked.
func maskTruncated(b *Batch) (int, error) {
	of, _, err := b.trajIndex()
	if err != nil {
		return 0, err
	}
	if len(b.Truncated) != len(of) {
		return 0, fmt.Errorf("rl: the batch marks %d sequences truncated or not, of %d", len(b.Truncated), len(of))
	}
	left, cut := 0, 0
	for i := range of {
		s, e := b.Seq(i)
		for k := s; k < e; k++ {
			if b.ActionMask[k] && !b.Truncated[i] {
				left++
			}
		}
	}
	if left == 0 {
		return 0, nil
	}
	mask := make([]bool, len(b.ActionMask)) // a copy: AdvantageMask may share the slice
	copy(mask, b.ActionMask)
	for i, j := range of {
		if !b.Truncated[i] {
			continue
		}
		if i == 0 || of[i-1] != j {
			cut++
		}
		s, e := b.Seq(i)
		clear(mask[s:e])
	}
	b.ActionMask = mask
	return cut, nil
}

// maskTruncation applies rollout.truncation_loss mask to the step's
// global batch, whose sequences score marked (markTruncated), and records
// rollout/truncation_masked.
func (t *Trainer) maskTruncation(b *Batch, m Metrics) error {
	if t.Cfg.Rollout.TruncationLoss != TruncationMask {
		return nil
	}
	n, err := maskTruncated(b)
	if err != nil {
		return err
	}
	m["rollout/truncation_masked"] = float64(n)
	return nil
}
