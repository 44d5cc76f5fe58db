package rl

import (
	"fmt"
	"slices"

	"github.com/r1go/r1go/env"
)

// Step mode: a trajectory as a sequence of turns, each trained as a sample
// of its own, as in Agent-R1's step-level MDP. The state of turn k is the
// prompt the environment built for it (env.Contexter, env.context), the
// action is the policy's whole response. A whole trajectory is the case
// where every prompt extends the last prompt and response token for token;
// step mode with the full context policy rolls out exactly that, and the
// packer merges such turns into one sequence, so it trains on the batch
// whole mode builds.
//
// The rollout keeps two records of a step-mode trajectory:
//
//   - Trajectory.Tokens, Action, LogProb: the transcript, every response
//     and observation in order, what whole mode would have held. The
//     outcome is scored on it and the dump shows it.
//   - Trajectory.Steps: each turn's (prompt, response, log-probs), the
//     samples FromSteps packs for training.
//
// Between turns the slot's cache continues when the next prompt extends
// the context in it (only the new tokens are fed) and is reset and refilled
// when the environment rewrote the context (TurnSample.Rewrite).
//
// Length budgets: a turn ends at max_turn_tokens; the transcript after the
// first prompt at max_response_tokens; and a turn's context (prompt and
// response) at the model's window, MaxLen − 1 positions. In whole mode the
// context is the transcript, so the last two are one limit; in step mode a
// context policy that forgets keeps each turn inside the window while the
// transcript grows past it.

// The rollout.trajectory values.
const (
	TrajectoryWhole = "whole" // one append-only sample per trajectory
	TrajectoryStep  = "step"  // one sample per turn
)

// TurnSample is one turn of a step-mode trajectory as a training sample.
type TurnSample struct {
	Prompt   []int32   // the context the environment built for this turn
	Response []int32   // the policy's tokens, as sampled
	LogProb  []float32 // the sampler's log-probability of each response token
	// Rewrite says the prompt does not extend the previous turn's prompt
	// and response: the environment rewrote the context, and the rollout
	// refilled the cache from it.
	Rewrite bool
}

// validateTrajectory checks rollout.trajectory and what step mode cannot
// be combined with.
func (c *RolloutConfig) validateTrajectory() error {
	switch c.Trajectory {
	case "", TrajectoryWhole:
	case TrajectoryStep:
		if c.Mode == "external" {
			return fmt.Errorf("rl: rollout.trajectory step needs the builtin rollout: mode external records whole trajectories")
		}
	default:
		return fmt.Errorf("rl: rollout.trajectory %q is neither %s nor %s", c.Trajectory, TrajectoryWhole, TrajectoryStep)
	}
	switch c.Verify {
	case "", VerifyFail, VerifyDrop, VerifyOff:
	default:
		return fmt.Errorf("rl: rollout.verify %q is not %s, %s or %s", c.Verify, VerifyFail, VerifyDrop, VerifyOff)
	}
	return nil
}

// stepState is a step-mode trajectory's context in the rollout.
type stepState struct {
	hist    env.History
	context func(*env.History) []int32 // the episode's policy, or full
	prompt  []int32                    // this turn's prompt
	start   int                        // index in Tokens of this turn's first response token
	rewrite bool                       // this turn's prompt is a rewrite
}

func (r *Rollout) newStepState(ep env.Episode, prompt []int32) *stepState {
	st := &stepState{prompt: prompt, start: len(prompt)}
	st.hist.Prompt = prompt
	st.hist.Encode = func(s string) []int32 { return toInt32(r.Tok.Encode(s)) }
	if c, ok := ep.(env.Contexter); ok {
		st.context = c.Context
	} else {
		full := env.DefaultContextConfig()
		st.context = full.Build
	}
	return st
}

// turnLen is how many tokens of the current turn's response t holds.
func (st *stepState) turnLen(t *Trajectory) int { return len(t.Tokens) - st.start }

// atLimit says whether the trajectory must stop sampling: its transcript
// holds max_response_tokens after the first prompt, or its turn's context
// fills the window.
func (st *stepState) atLimit(r *Rollout, t *Trajectory) bool {
	return t.ResponseLen() >= r.Cfg.MaxResponseTokens || len(st.prompt)+st.turnLen(t) >= r.Policy.MaxLen()-1
}

// record appends the turn that just ended to t.Steps.
func (st *stepState) record(t *Trajectory) {
	t.Steps = append(t.Steps, TurnSample{Prompt: st.prompt, Response: slices.Clone(t.Tokens[st.start:]),
		LogProb: slices.Clone(t.LogProb[st.start:]), Rewrite: st.rewrite})
}

// observeStep is observe in step mode: the observation goes into the
// transcript and the history, the episode builds the next prompt, and the
// trajectory goes on from it (the cache continued, or reset and refilled
// for a rewrite) or finishes at a length limit. Under the full policy it
// does what observe does in whole mode, token for token: the observation
// is cut to the same room and the same next tokens are fed.
func (x *rolloutRun) observeStep(s *trajState, res env.StepResult) {
	t, st := s.t, s.step
	t.ToolCallEnds = append(t.ToolCallEnds, len(t.Tokens)-1)
	t.ProcessRewards = append(t.ProcessRewards, res.Reward)
	obs := toInt32(x.Tok.Encode(res.Observation))
	cur := len(st.prompt) + st.turnLen(t) // the context so far; its last token is not yet fed
	cut := false
	reason := FinishLength
	if room := x.Cfg.MaxResponseTokens - t.ResponseLen(); len(obs) >= room {
		obs, cut = obs[:max(room, 0)], true // the transcript's budget
	}
	var next []int32
	extends := false
	if !cut {
		ex := env.Exchange{Response: slices.Clone(t.Tokens[st.start:]), Observation: obs}
		if res.Elided != "" {
			ex.Elided = toInt32(x.Tok.Encode(res.Elided))
		}
		st.hist.Turns = append(st.hist.Turns, ex)
		next = st.context(&st.hist)
		extends = len(next) > cur && env.Extends(next, st.prompt) && slices.Equal(next[len(st.prompt):cur], t.Tokens[st.start:])
		if len(next) >= x.Policy.MaxLen()-1 { // no room for a token of the next turn
			if extends {
				obs = obs[:max(x.Policy.MaxLen()-1-cur, 0)] // what whole mode keeps
			}
			cut, reason = true, FinishContext
		}
	}
	t.Tokens = append(t.Tokens, obs...)
	t.Action = append(t.Action, make([]bool, len(obs))...)
	t.LogProb = append(t.LogProb, make([]float32, len(obs))...)
	switch {
	case cut:
		x.finish(s, reason)
	case res.Done:
		x.finish(s, FinishMaxTurns)
	default:
		s.state = seqDecode
		st.prompt, st.start, st.rewrite = next, len(t.Tokens), !extends
		if extends {
			// The cache holds the context but its last token, which was
			// drawn and not yet fed.
			s.pending = append(s.pending[:0], next[cur-1:]...)
		} else {
			x.Policy.Reset(s.slot)
			s.pending = append(s.pending[:0], next...)
		}
	}
}
