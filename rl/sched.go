package rl

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/r1go/r1go/model"
)

// The continuous-batching scheduler. Every client of the policy runs on
// it: the built-in rollout (Rollout, whose sequences are env episodes and
// which cmd/eval runs too) and the Engine (requests of the
// OpenAI-compatible endpoint, cmd/serve, and of the external rollout).
// The clients differ in where work comes from and what a drawn token
// means; slots, admission, prefill sharing, the packed batch, host and
// device sampling and cancellation are the scheduler's, written once.
//
// A sequence moves through explicit states, each with one handler:
//
//	state     handler                           leaves for
//	queued    scheduler.admit: a free slot      prefill
//	prefill   scheduler.step: the prompt is     decode, tool, finished
//	          fed, or a follower forks its
//	          leader's cache and draws its
//	          first token from the leader's row
//	decode    scheduler.step: the pending       decode, tool, finished
//	          tokens are fed, one token drawn
//	tool      the client (Rollout.observe)      decode, finished
//	finished  scheduler.release: slot freed     -
//
// After a draw the client's token handler (the rollout's sampled, the
// engine's token) chooses the next state: decode with the token pending,
// tool when the turn is over and the environment must answer, finished
// when a stop or a limit is reached.
//
// A prefill budget (RolloutConfig.PrefillTokens) bounds the tokens of one
// step, and with them the model's step activations: every decode (one
// token) is fed, and the multi-token chunks (prompts, observations) share
// what is left, in admission order, the rest of a cut chunk waiting for
// the next step. A sequence whose chunk was cut draws nothing (its row is
// not after its last token) and stays in its state; its followers fork and
// draw once its whole prompt is in. Without a budget every chunk is fed
// whole, as before chunking existed; with one, the batch's composition
// changes and with it the floating-point results, as any batch change does.
//
// Reproducibility rests on orders that are all fixed here: sequences are
// admitted in submission order, a group (a leader and the followers that
// share its prefill) at once, each into the slot freed last (the lowest at
// the start); the batch is the admitted sequences in admission order; the
// client handles a step's draws in one order (step's); and each sequence
// draws from its own random stream, so what it samples does not depend on
// its batch neighbours beyond the floating-point results of the batch
// itself. A client that changes none of these inputs gets the same tokens.

// seqState is where a sequence is in its life; see the table above.
type seqState uint8

const (
	seqQueued   seqState = iota // submitted, waiting for a slot
	seqPrefill                  // in a slot; its prompt (or its leader's) not yet fed
	seqDecode                   // in the batch: its pending tokens are fed next
	seqTool                     // out of the batch, waiting for its environment
	seqFinished                 // done; its slot is free again
)

// seq is the scheduler's part of one sequence: a rollout trajectory or an
// engine request embeds it.
type seq struct {
	state    seqState
	slot     int
	pending  []int32 // tokens to feed next (the prompt, then one drawn token or a token and an observation)
	rng      *rand.Rand
	sampling model.Sampling
	// leader, on a follower, is the sequence whose prefill it shares: it is
	// admitted with it, forks its cache once the prompt is fed and draws its
	// first token from the leader's logits row.
	leader *seq
	// wantRow asks for the full logits row of every draw (log-probabilities
	// of the drawn token and its alternatives), which a device that samples
	// otherwise keeps to itself.
	wantRow bool
	// ctx, when set, cancels the sequence: scheduler.drop removes it.
	ctx context.Context
}

func (s *seq) base() *seq { return s }

// sequence is what a scheduler schedules: a client type that embeds seq.
type sequence interface{ base() *seq }

// drawn is one token a scheduler step drew for s.
type drawn[S sequence] struct {
	s  S
	id int32
	lp float32 // the sampler's log-probability
	// row is the logits row it was drawn from, valid until the next step;
	// nil on a device that samples, unless the sequence wants rows or has
	// followers.
	row []float32
}

// scheduler holds the policy's slots and the sequences in them.
type scheduler[S sequence] struct {
	policy Policy
	free   []int // free slots, a stack: the slot freed last is taken first
	queue  []S   // submitted and not yet admitted, in order
	active []S   // admitted, in admission order: the order of the batch

	// budget is the most tokens one step feeds (the prefill budget); 0
	// feeds every chunk whole.
	budget int

	chunks []model.Chunk // this step's batch, one chunk per owner
	owners []S
	cut    []bool // cut[j]: owners[j]'s chunk is a prefix of its pending tokens
	draws  []drawn[S]
	picks  []model.Draw // host draws: each draw's row, stream and result
}

// newScheduler schedules over p's slots, feeding at most budget tokens a
// step (0: no limit).
func newScheduler[S sequence](p Policy, budget int) *scheduler[S] {
	q := &scheduler[S]{policy: p, budget: budget}
	for s := p.Slots() - 1; s >= 0; s-- {
		q.free = append(q.free, s)
	}
	return q
}

// submit queues s behind the sequences already submitted. A follower must
// be submitted right after its leader or another of the leader's followers.
func (q *scheduler[S]) submit(s S) {
	s.base().state = seqQueued
	q.queue = append(q.queue, s)
}

// admit moves queued sequences into free slots, in order, a leader and its
// followers together so that the leader's prefill can be forked into them
// right after it runs; it stops at the first group that does not fit.
func (q *scheduler[S]) admit() {
	for len(q.queue) > 0 {
		head := q.queue[0].base()
		g := 1
		for g < len(q.queue) && q.queue[g].base().leader == head {
			g++
		}
		if g > len(q.free) {
			return
		}
		for _, s := range q.queue[:g] {
			b := s.base()
			b.slot = q.free[len(q.free)-1]
			q.free = q.free[:len(q.free)-1]
			b.state = seqPrefill
			q.policy.Reset(b.slot)
			q.active = append(q.active, s)
		}
		q.queue = q.queue[g:]
	}
}

// release is the finished state's handler: s leaves and its slot is free
// for the next admission. The client calls it when a sequence ends.
func (q *scheduler[S]) release(s S) {
	b := s.base()
	if b.state != seqQueued {
		q.free = append(q.free, b.slot)
	}
	b.state = seqFinished
}

// compact drops finished sequences from the active list.
func (q *scheduler[S]) compact() {
	q.active = slices.DeleteFunc(q.active, func(s S) bool { return s.base().state == seqFinished })
}

// drop removes the sequences whose context is done, admitted ones first
// (their slots are freed) and then queued ones, and hands each to gone with
// the context's error.
func (q *scheduler[S]) drop(gone func(S, error)) {
	cut := func(s S) bool {
		b := s.base()
		if b.ctx == nil || b.ctx.Err() == nil {
			return false
		}
		q.release(s)
		gone(s, b.ctx.Err())
		return true
	}
	q.active = slices.DeleteFunc(q.active, cut)
	q.queue = slices.DeleteFunc(q.queue, cut)
}

// gather collects the batch of the next step, one chunk per admitted
// sequence that has tokens to feed (a prompt in prefill, or decode), cut
// to the budget, and returns its size.
func (q *scheduler[S]) gather() int {
	q.chunks, q.owners, q.cut = q.chunks[:0], q.owners[:0], q.cut[:0]
	room := q.budget // what the multi-token chunks may take
	if q.budget > 0 {
		for _, s := range q.active {
			if b := s.base(); b.feeds() && len(b.pending) == 1 {
				room--
			}
		}
	}
	for _, s := range q.active {
		b := s.base()
		if !b.feeds() {
			continue
		}
		n := len(b.pending)
		if q.budget > 0 && n > 1 {
			if room <= 0 {
				continue // waits for a step with room
			}
			n = min(n, room)
			room -= n
		}
		q.chunks = append(q.chunks, model.Chunk{Slot: b.slot, Tokens: b.pending[:n]})
		q.owners = append(q.owners, s)
		q.cut = append(q.cut, n < len(b.pending))
	}
	return len(q.chunks)
}

// feeds reports whether the sequence has tokens for the next step.
func (b *seq) feeds() bool {
	return (b.state == seqPrefill || b.state == seqDecode) && len(b.pending) > 0
}

// firstFrom reports whether f is a follower whose first token comes from
// leader's row in this step.
func firstFrom[S sequence](f S, leader *seq) bool {
	b := f.base()
	return b.leader == leader && b.state == seqPrefill && b != leader
}

// step feeds the gathered batch and draws each owner's next token, and the
// first token of each follower of a leader whose prefill just ran (from
// that leader's row, into the follower's own stream, after the follower
// forked the leader's cache). It returns the draws in the order the client
// must handle them: for each owner, its new followers, then the owner. Every
// drawn sequence is left in state decode with nothing pending; the client's
// token handler says what comes next.
func (q *scheduler[S]) step() ([]drawn[S], error) {
	q.draws = q.draws[:0]
	if dp, ok := q.policy.(DeviceSamplingPolicy); ok && dp.SamplesOnDevice() {
		if err := q.stepOnDevice(dp); err != nil {
			return nil, fmt.Errorf("rl: policy forward: %w", err)
		}
		return q.draws, nil
	}
	logits, err := q.policy.Feed(q.chunks)
	if err != nil {
		return nil, fmt.Errorf("rl: policy forward: %w", err)
	}
	// The rows are drawn together, spread over the cores; each draw uses
	// only its own stream, so the tokens are those of drawing in turn.
	V := q.policy.Vocab()
	q.picks = q.picks[:0]
	for j, s := range q.owners {
		if q.cut[j] {
			continue
		}
		row := logits[j*V : (j+1)*V]
		for _, f := range q.active {
			if firstFrom(f, s.base()) {
				fb := f.base()
				q.draws = append(q.draws, drawn[S]{s: f, row: row})
				q.picks = append(q.picks, model.Draw{Row: row, S: fb.sampling, Rng: fb.rng})
			}
		}
		q.draws = append(q.draws, drawn[S]{s: s, row: row})
		q.picks = append(q.picks, model.Draw{Row: row, S: s.base().sampling, Rng: s.base().rng})
	}
	model.SampleAll(q.picks)
	for i := range q.draws {
		q.draws[i].id, q.draws[i].lp = q.picks[i].ID, q.picks[i].LogProb
	}
	q.settle()
	return q.draws, nil
}

// settle moves every drawn sequence to decode with nothing pending, forking
// each new follower's cache from its leader's, and leaves each cut
// sequence in its state with the rest of its tokens pending.
func (q *scheduler[S]) settle() {
	for j, s := range q.owners {
		if q.cut[j] {
			b := s.base()
			b.pending = b.pending[len(q.chunks[j].Tokens):]
		}
	}
	for _, d := range q.draws {
		b := d.s.base()
		if b.state == seqPrefill && b.leader != nil {
			q.policy.Fork(b.slot, b.leader.slot)
		}
		b.state = seqDecode
		b.pending = b.pending[:0]
	}
}
