package rl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/r1go/r1go/model"
)

// Engine is the continuous-batching generator that concurrent requests
// share: the OpenAI-compatible server (rl/serve) and the trainer's external
// rollout mode submit requests, and one goroutine drives the scheduler
// that the built-in rollout runs on too (sched.go), which feeds every
// admitted request's pending tokens to the policy as one packed batch per
// step. A request joins the batch as soon as a KV slot is free and leaves
// it when it stops, so a long answer never holds up a short one.
//
// Like the built-in rollout it is token in, token out: a request is a list
// of prompt ids and the result is the sampled ids with the sampler's
// log-probabilities, never re-encoded text.
type Engine struct {
	policy Policy
	budget int // tokens a step feeds at most (0: no limit)
	submit chan *genJob
	hold   sync.Mutex // held by the loop around each forward pass, and by Pause
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// GenRequest is one completion to generate.
type GenRequest struct {
	Prompt      []int32
	Sampling    model.Sampling
	Seed        uint64  // the request's random stream; equal seeds draw equal tokens
	MaxTokens   int     // tokens to generate at most (≤ 0: until the context is full)
	Stop        []int32 // ids that end the completion; the stop id is part of it
	Logprobs    bool    // report each token's log-probability under the model
	TopLogprobs int     // and the most likely alternatives (0..20)
}

// TokenLogprob is a candidate token and its log-probability under the model.
type TokenLogprob struct {
	ID      int32
	Logprob float32
}

// GenToken is one generated token.
type GenToken struct {
	ID int32
	// SampleLogprob is the sampler's log-probability (temperature applied,
	// before top-p; 0 for greedy), the value the trainer keeps.
	SampleLogprob float32
	// Logprob is log softmax of the raw logits, as OpenAI reports it; set
	// only when the request asks for log-probabilities.
	Logprob float32
	Top     []TokenLogprob
}

// Generation is a finished completion.
type Generation struct {
	Tokens []GenToken
	// Finish is "stop" when a stop id ended it, "length" when MaxTokens or
	// the context did.
	Finish string
}

// IDs are the generated token ids.
func (g *Generation) IDs() []int32 {
	out := make([]int32, len(g.Tokens))
	for i, t := range g.Tokens {
		out[i] = t.ID
	}
	return out
}

// ErrEngineClosed is returned for requests made after Close.
var ErrEngineClosed = errors.New("rl: the engine is closed")

// genJob is one request in the scheduler.
type genJob struct {
	seq
	req     GenRequest
	onToken func(GenToken) bool
	res     chan error
	gen     Generation
	limit   int
}

// NewEngine starts the loop over policy, feeding at most prefillTokens
// tokens a step (RolloutConfig.PrefillTokens; 0: no limit); Close stops it.
func NewEngine(policy Policy, prefillTokens int) *Engine {
	e := &Engine{policy: policy, budget: prefillTokens, submit: make(chan *genJob), stop: make(chan struct{}), done: make(chan struct{})}
	go e.loop()
	return e
}

// Slots is the number of requests decoded together.
func (e *Engine) Slots() int { return e.policy.Slots() }

// MaxLen is the context of one request, prompt and completion.
func (e *Engine) MaxLen() int { return e.policy.MaxLen() }

// Close stops the loop; requests in flight fail with ErrEngineClosed.
func (e *Engine) Close() {
	e.once.Do(func() { close(e.stop) })
	<-e.done
}

// Pause waits for the forward pass in progress and holds the loop until
// Resume, so that the weights can be updated in place.
func (e *Engine) Pause() { e.hold.Lock() }

// Resume lets a paused loop continue.
func (e *Engine) Resume() { e.hold.Unlock() }

// Generate runs one request to its end. onToken, when not nil, is called
// from the engine loop with each token as it is sampled (streaming, stop
// strings); returning true ends the completion there with Finish "stop".
// It must not block for long.
func (e *Engine) Generate(ctx context.Context, req GenRequest, onToken func(GenToken) bool) (*Generation, error) {
	if len(req.Prompt) == 0 {
		return nil, errors.New("rl: empty prompt")
	}
	if len(req.Prompt) >= e.policy.MaxLen() {
		return nil, fmt.Errorf("rl: a prompt of %d tokens leaves no room in a context of %d", len(req.Prompt), e.policy.MaxLen())
	}
	if err := req.Sampling.Validate(); err != nil {
		return nil, err
	}
	if req.TopLogprobs < 0 || req.TopLogprobs > 20 {
		return nil, fmt.Errorf("rl: top_logprobs %d outside 0..20", req.TopLogprobs)
	}
	for _, id := range req.Prompt {
		if id < 0 || int(id) >= e.policy.Vocab() {
			return nil, fmt.Errorf("rl: prompt token %d outside the vocabulary of %d", id, e.policy.Vocab())
		}
	}
	j := &genJob{req: req, onToken: onToken, res: make(chan error, 1)}
	j.seq = seq{ctx: ctx, rng: rand.New(rand.NewPCG(req.Seed, 0x5e7e)), sampling: req.Sampling,
		wantRow: req.Logprobs || req.TopLogprobs > 0, pending: slices.Clone(req.Prompt)}
	j.limit = e.policy.MaxLen() - len(req.Prompt)
	if req.MaxTokens > 0 {
		j.limit = min(j.limit, req.MaxTokens)
	}
	select {
	case e.submit <- j:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-e.stop:
		return nil, ErrEngineClosed
	}
	if err := <-j.res; err != nil {
		return nil, err
	}
	return &j.gen, nil
}

// loop is the engine's driver of the scheduler: requests are submitted
// as they arrive, dropped when their client goes away, and each step's
// tokens go to token.
func (e *Engine) loop() {
	defer close(e.done)
	q := newScheduler[*genJob](e.policy, e.budget)
	var toks []GenToken
	fail := func(err error) {
		for _, j := range append(q.queue, q.active...) {
			j.res <- err
		}
	}
	for {
		// Wait for work when there is none; take what was submitted otherwise.
		if len(q.active) == 0 && len(q.queue) == 0 {
			select {
			case j := <-e.submit:
				q.submit(j)
			case <-e.stop:
				return
			}
		}
		for drained := false; !drained; {
			select {
			case j := <-e.submit:
				q.submit(j)
			case <-e.stop:
				fail(ErrEngineClosed)
				return
			default:
				drained = true
			}
		}
		q.drop(func(j *genJob, err error) { j.res <- err })
		q.admit()
		if q.gather() == 0 {
			continue
		}
		e.hold.Lock()
		draws, err := q.step()
		if err == nil {
			toks = genTokens(toks[:0], draws)
		}
		e.hold.Unlock()
		if err != nil {
			fail(err)
			return
		}
		for i, d := range draws {
			e.token(q, d.s, toks[i])
		}
		q.compact()
	}
}

// genTokens turns a step's draws into tokens, with the model
// log-probabilities their requests ask for, the rows spread over the cores.
func genTokens(toks []GenToken, draws []drawn[*genJob]) []GenToken {
	toks = slices.Grow(toks, len(draws))[:len(draws)]
	model.EachRow(len(draws), func(i int, _ *[]int32) {
		toks[i] = genToken(draws[i].id, draws[i].lp, draws[i].row, &draws[i].s.req)
	})
	return toks
}

// token is the decode state's handler for a request: the token is
// streamed, and the request ends at a stop id, when onToken says so, or at
// its length limit; otherwise the token is fed next.
func (e *Engine) token(q *scheduler[*genJob], j *genJob, tok GenToken) {
	j.gen.Tokens = append(j.gen.Tokens, tok)
	halt := j.onToken != nil && j.onToken(tok)
	switch {
	case halt || slices.Contains(j.req.Stop, tok.ID):
		j.gen.Finish = "stop"
	case len(j.gen.Tokens) >= j.limit:
		j.gen.Finish = "length"
	default:
		j.pending = append(j.pending[:0], tok.ID)
		return
	}
	q.release(j)
	j.res <- nil
}

// genToken is a drawn token and, when asked, its model log-probabilities
// from row, the logits it was drawn from.
func genToken(id int32, lp float32, row []float32, req *GenRequest) GenToken {
	t := GenToken{ID: id, SampleLogprob: lp}
	if !req.Logprobs && req.TopLogprobs == 0 || row == nil {
		return t
	}
	lse := logSumExp(row)
	t.Logprob = row[id] - lse
	if k := req.TopLogprobs; k > 0 {
		t.Top = topK(row, k, lse)
	}
	return t
}

func logSumExp(row []float32) float32 {
	m := row[0]
	for _, v := range row {
		m = max(m, v)
	}
	var s float64
	for _, v := range row {
		s += math.Exp(float64(v - m))
	}
	return m + float32(math.Log(s))
}

// topK returns the k most likely tokens, most likely first, ties to the
// lower id.
func topK(row []float32, k int, lse float32) []TokenLogprob {
	out := make([]TokenLogprob, 0, k+1)
	for i, v := range row {
		if len(out) == k && v <= out[k-1].Logprob {
			continue
		}
		at, _ := slices.BinarySearchFunc(out, v, func(a TokenLogprob, v float32) int {
			if a.Logprob >= v {
				return -1
			}
			return 1
		})
		out = slices.Insert(out, at, TokenLogprob{ID: int32(i), Logprob: v})
		if len(out) > k {
			out = out[:k]
		}
	}
	for i := range out {
		out[i].Logprob -= lse
	}
	return out
}
