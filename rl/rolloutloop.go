package rl

import (
	"context"
	"fmt"
	"slices"

	"github.com/r1go/r1go/env"
)

// The rollout's loop: a run of the scheduler (sched.go) over the
// trajectories of a Run, or over those a streaming feed submits while it
// goes (asynchronous training, async.go), and the handlers of a drawn
// token (sampled), a tool's answer (observe) and a finished trajectory
// (finish).

// rolloutRun is one Run's driver of the scheduler: the tool calls in
// flight and where their answers arrive.
type rolloutRun struct {
	*Rollout
	ctx     context.Context
	q       *scheduler[*trajState]
	results chan toolResult
	sem     chan struct{} // bounds the tool calls running at once
	running int           // tool calls in flight
	// feed, in a streaming run (asynchronous training, async.go), submits
	// trajectories while the run goes on and takes the finished ones; nil
	// in a Run, which has them all at the start.
	feed    rolloutFeed
	version int32 // the policy version of the step being handled (a streaming run's)
}

// rolloutFeed is what a streaming run adds to the loop: trajectories
// submitted while it runs, a version and a lock on the weights around each
// forward step (a refresh of the weights waits for the step to end), and
// where the finished trajectories go.
type rolloutFeed interface {
	// more submits to q what may start now and says whether more may
	// come later (false: the stream is closed).
	more(q *scheduler[*trajState]) (open bool, err error)
	// wake is signalled when more may start.
	wake() <-chan struct{}
	// stepBegin locks the weights for one forward step and returns their
	// version; stepEnd unlocks them.
	stepBegin() int32
	stepEnd()
	// done takes a finished trajectory.
	done(s *trajState)
}

func (r *Rollout) run(ctx context.Context, states []*trajState) ([]*Trajectory, error) {
	x := r.newRun(ctx, len(states))
	for _, s := range states {
		x.q.submit(s)
	}
	if err := x.loop(); err != nil {
		return nil, err
	}
	out := make([]*Trajectory, len(states))
	for i, s := range states {
		out[i] = s.t
	}
	return out, nil
}

// newRun makes the driver of a run that expects about n trajectories at a
// time (the room for tool answers).
func (r *Rollout) newRun(ctx context.Context, n int) *rolloutRun {
	return &rolloutRun{Rollout: r, ctx: ctx, q: newScheduler[*trajState](r.Policy, r.Cfg.PrefillTokens),
		results: make(chan toolResult, max(n, 1)), sem: make(chan struct{}, r.Cfg.ToolConcurrency)}
}

// loop runs the scheduler until every trajectory has finished and, in a
// streaming run, the feed is closed.
func (x *rolloutRun) loop() error {
	open := x.feed != nil
	for {
		if x.feed != nil && x.ctx.Err() != nil {
			// A streaming run stops when its context does (AsyncRollout.Close),
			// not once the groups it admitted have all finished.
			return x.ctx.Err()
		}
		if x.feed != nil && open {
			var err error
			if open, err = x.feed.more(x.q); err != nil {
				return err
			}
		}
		x.q.admit()
		if x.Cfg.Deterministic {
			for x.running > 0 {
				if err := x.await(false); err != nil {
					return err
				}
			}
		}
		if x.q.gather() == 0 {
			if x.running == 0 {
				if len(x.q.queue) > 0 {
					if len(x.q.active) > 0 {
						if x.q.compact(); len(x.q.active) == 0 {
							continue // every slot is free again: admit the next groups
						}
					}
					return fmt.Errorf("rl: rollout stalled with %d trajectories queued", len(x.q.queue))
				}
				if !open {
					return nil
				}
			}
			if err := x.await(open); err != nil {
				return err
			}
			continue
		}
		if x.feed != nil {
			x.version = x.feed.stepBegin()
		}
		draws, err := x.q.step()
		if x.feed != nil {
			x.feed.stepEnd()
		}
		if err != nil {
			return err
		}
		for _, d := range draws {
			x.sampled(d.s, d.id, d.lp)
		}
		// Take the tool calls that have finished, without blocking.
		for drained := false; !drained; {
			select {
			case tr := <-x.results:
				x.running--
				x.observe(tr.s, tr.res)
			default:
				drained = true
			}
		}
		x.q.compact()
	}
}

// await waits for one tool call to finish and applies its answer; with
// fed, a streaming run's feed waking (more may start) ends the wait too.
func (x *rolloutRun) await(fed bool) error {
	var wake <-chan struct{}
	if fed {
		wake = x.feed.wake()
	}
	select {
	case tr := <-x.results:
		x.running--
		x.observe(tr.s, tr.res)
		return nil
	case <-wake:
		return nil
	case <-x.ctx.Done():
		return x.ctx.Err()
	}
}

// sampled is the handler of a drawn token: it records the token, then ends
// the turn when the token stops it or a limit is reached (the trajectory
// waits for its tool, or finishes), and otherwise queues the token to be
// fed.
func (x *rolloutRun) sampled(s *trajState, id int32, lp float32) {
	t := s.t
	t.Tokens = append(t.Tokens, id)
	t.Action = append(t.Action, true)
	t.LogProb = append(t.LogProb, lp)
	if x.feed != nil {
		t.Versions = append(t.Versions, x.version)
	}
	s.turn = append(s.turn, int(id))
	stop := slices.Contains(x.Stop, id)
	textEnd := -1 // where a stop string ends in the turn's text
	if stops := x.stopStrings(); len(stops) > 0 && !stop {
		textEnd = x.stopStringEnd(s, stops, id)
		stop = textEnd >= 0
	}
	full := x.atLimit(s)
	if !stop && !full && len(s.turn) < x.Cfg.MaxTurnTokens {
		s.pending = append(s.pending[:0], id)
		return
	}
	t.Turns++
	s.cut = !stop
	if s.step != nil {
		s.step.record(t)
	}
	text := x.Tok.Decode(s.turn)
	if textEnd >= 0 {
		text = text[:textEnd] // the tokens stay whole; the environment reads up to the stop string
	}
	s.turn, s.text = s.turn[:0], s.text[:0]
	if full && !stop {
		x.finish(s, x.limitReason(s))
		return
	}
	s.state = seqTool
	x.running++
	ctx, sem, results := x.ctx, x.sem, x.results
	go func() {
		sem <- struct{}{}
		res := s.ep.Step(ctx, text)
		<-sem
		results <- toolResult{s, res}
	}()
}

// atLimit says whether s may sample no further token: its response (in
// step mode, its transcript or its turn's context) is at its limit.
func (x *rolloutRun) atLimit(s *trajState) bool {
	if s.step != nil {
		return s.step.atLimit(x.Rollout, s.t)
	}
	return s.t.ResponseLen() >= x.responseLimit(s.t)
}

// limitReason names the budget that s reached: the trajectory's
// (max_response_tokens) or the model's window.
func (x *rolloutRun) limitReason(s *trajState) Finish {
	if s.step != nil {
		if s.t.ResponseLen() >= x.Cfg.MaxResponseTokens {
			return FinishLength
		}
		return FinishContext
	}
	if x.Cfg.MaxResponseTokens <= x.responseLimit(s.t) {
		return FinishLength
	}
	return FinishContext
}

// responseLimit is how many response tokens t may hold: the configured
// limit, and the slot's context after the prompt.
func (r *Rollout) responseLimit(t *Trajectory) int {
	return min(r.Cfg.MaxResponseTokens, r.Policy.MaxLen()-t.PromptLen-1)
}

// observe is the tool state's handler: it applies the environment's answer
// to a finished turn, and the trajectory decodes on from the observation or
// finishes.
func (x *rolloutRun) observe(s *trajState, res env.StepResult) {
	t := s.t
	t.ToolCalls += len(res.Info.Calls)
	t.TruncatedResponses += res.Info.Truncated
	if res.Observation == "" {
		reason := FinishAnswer
		if s.cut {
			reason = FinishTurnLimit
		}
		x.finish(s, reason)
		return
	}
	if s.step != nil {
		x.observeStep(s, res)
		return
	}
	t.ToolCallEnds = append(t.ToolCallEnds, len(t.Tokens)-1)
	t.ProcessRewards = append(t.ProcessRewards, res.Reward)
	obs := toInt32(x.Tok.Encode(res.Observation))
	room := x.responseLimit(t) - t.ResponseLen()
	truncated := len(obs) >= room
	if truncated {
		obs = obs[:max(room, 0)]
	}
	last := t.Tokens[len(t.Tokens)-1]
	t.Tokens = append(t.Tokens, obs...)
	t.Action = append(t.Action, make([]bool, len(obs))...)
	t.LogProb = append(t.LogProb, make([]float32, len(obs))...)
	switch {
	case truncated:
		x.finish(s, x.limitReason(s))
	case res.Done:
		x.finish(s, FinishMaxTurns)
	default:
		s.state = seqDecode
		s.pending = append(append(s.pending[:0], last), obs...)
	}
}

// finish scores the trajectory and frees its slot.
func (x *rolloutRun) finish(s *trajState, why Finish) {
	s.t.Finish = why
	s.t.Outcome = s.ep.Outcome(x.Tok.Decode(toInts(s.t.Tokens)))
	x.q.release(s)
	if x.feed != nil {
		x.feed.done(s)
	}
}
