package rl

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/optim"
)

// Teacher builds the trajectory of a sample's given assistant turns, as if
// the policy had sampled them: the prompt as the rollout renders it, each
// turn's tokens with action mask 1, and the environment's real observations
// (the tools run) with action mask 0. The final turn, which calls no tool,
// is closed with the end-of-turn token so that the model learns to stop.
// It is the supervised warm start's data (the synthetic world's gold
// trajectories) and a way to score fixed answers. In step mode
// (rollout.trajectory=step) it records each turn's sample as the rollout
// does, the prompt built by the episode's context policy, so the warm start
// imitates each turn in the context the policy will see it in.
func (r *Rollout) Teacher(ctx context.Context, s data.Sample, turns []string, endOfTurn int32) (*Trajectory, error) {
	ep := r.Env.Episode()
	msgs, tools := ep.Reset(s)
	prompt, err := r.encodePrompt(msgs, tools)
	if err != nil {
		return nil, fmt.Errorf("rl: sample %s: %w", s.ID, err)
	}
	t := &Trajectory{Sample: s, Tokens: slices.Clone(prompt), PromptLen: len(prompt),
		Action: make([]bool, len(prompt)), LogProb: make([]float32, len(prompt))}
	var st *stepState
	if r.Cfg != nil && r.Cfg.Trajectory == TrajectoryStep {
		st = r.newStepState(ep, prompt)
	}
	for i, turn := range turns {
		ids := toInt32(r.Tok.Encode(turn))
		res := ep.Step(ctx, turn)
		if res.Observation == "" {
			ids = append(ids, endOfTurn)
		}
		if st != nil {
			t.Steps = append(t.Steps, TurnSample{Prompt: st.prompt, Response: ids, LogProb: make([]float32, len(ids)), Rewrite: st.rewrite})
		}
		t.Tokens = append(t.Tokens, ids...)
		for range ids {
			t.Action = append(t.Action, true)
			t.LogProb = append(t.LogProb, 0)
		}
		t.Turns++
		t.ToolCalls += len(res.Info.Calls)
		if res.Observation == "" {
			if i != len(turns)-1 {
				return nil, fmt.Errorf("rl: sample %s: turn %d of %d ends the episode (no tool call)", s.ID, i+1, len(turns))
			}
			t.Finish = FinishAnswer
			break
		}
		t.ToolCallEnds = append(t.ToolCallEnds, len(t.Tokens)-1)
		t.ProcessRewards = append(t.ProcessRewards, res.Reward)
		obs := toInt32(r.Tok.Encode(res.Observation))
		if st != nil {
			ex := env.Exchange{Response: ids, Observation: obs}
			if res.Elided != "" {
				ex.Elided = toInt32(r.Tok.Encode(res.Elided))
			}
			st.hist.Turns = append(st.hist.Turns, ex)
			next := st.context(&st.hist)
			cur := append(slices.Clone(st.prompt), ids...)
			st.rewrite = !(len(next) > len(cur) && env.Extends(next, cur))
			st.prompt = next
		}
		t.Tokens = append(t.Tokens, obs...)
		t.Action = append(t.Action, make([]bool, len(obs))...)
		t.LogProb = append(t.LogProb, make([]float32, len(obs))...)
		if res.Done {
			t.Finish = FinishMaxTurns
			break
		}
	}
	t.Outcome = ep.Outcome(r.Tok.Decode(toInts(t.Tokens)))
	return t, nil
}

// SFTStep is one supervised update: the token-mean cross-entropy of the
// action tokens of trajs, accumulated over micro-batches of at most
// microTokens tokens, then one optimizer step. It returns the mean loss
// (nats per action token) and the optimizer's report.
func SFTStep(m *model.Model, opt *optim.AdamW, trajs []*Trajectory, microTokens int) (float64, optim.StepResult, error) {
	b := FromTrajectories(trajs, true)
	if len(trajs) > 0 && trajs[0].Steps != nil { // step mode: each turn in its own context (Teacher)
		var err error
		if b, _, err = FromSteps(trajs, true, true); err != nil {
			return 0, optim.StepResult{}, err
		}
	}
	var n float64
	for _, a := range b.ActionMask {
		if a {
			n++
		}
	}
	if n == 0 {
		return 0, optim.StepResult{}, fmt.Errorf("rl: SFT batch of %d trajectories has no action token", len(trajs))
	}
	m.ZeroGrads()
	cuts := MicroBatches(b, microTokens)
	var loss float64
	for j := 0; j+1 < len(cuts); j++ {
		mb := b.Slice(cuts[j], cuts[j+1])
		out, err := m.Forward(scoredBatch(mb, mb.ActionMask), true)
		if err != nil {
			return 0, optim.StepResult{}, err
		}
		lp := shiftIn(mb, nil, out.LogProb)
		g := make([]float64, mb.NumTokens())
		for t, a := range mb.ActionMask {
			if a {
				loss -= lp[t] / n
				g[t] = -1 / n
			}
		}
		if err := m.Backward(shiftOut(mb, g), nil, nil); err != nil {
			return 0, optim.StepResult{}, err
		}
	}
	if math.IsNaN(loss) {
		return 0, optim.StepResult{}, fmt.Errorf("rl: SFT loss is NaN")
	}
	return loss, opt.Step(1), nil
}
