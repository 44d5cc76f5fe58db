package rl

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/tokenizer"
)

// logprobTol bounds |Δ log-probability| between the device path and the
// host path: the device path steps each sampling group apart, so its
// products have other row counts than the host path's single step, and
// model/gemm takes other kernels for other row counts (the few-row dot
// kernels, the swapped product for 9-64 rows), whose float32 sums round
// differently: a few ulps of a logit, about 1e-6 of a log-probability near
// -10 (3e-6 seen). The tokens themselves must be equal.
const logprobTol = 2e-5

// TestEngineDeviceSamplingPath runs the engine over hostSampler (the
// device path with model.StepSample's host fallback standing in for the
// GPU; cuda/engine_test.go runs the real one). Greedy requests, some with
// log-probabilities and alternatives, must give the host path's tokens,
// log-probabilities and alternatives; every token must go through
// FeedSample, with a full row kept exactly for the tokens of requests
// that ask for log-probabilities. At temperature 1, requests decoded
// together (with mixed sampling settings, so the step splits by setting)
// must draw what each draws alone with its seed.
func TestEngineDeviceSamplingPath(t *testing.T) {
	m, tok := loadWarmstart(t)
	var reqs []GenRequest
	for i := 0; i < 6; i++ {
		ids, err := tok.EncodeChat([]tokenizer.Message{{Role: "user", Content: fmt.Sprintf("Question: Who founded company %d?", i)}}, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, GenRequest{Prompt: toInt32(ids), Sampling: model.Greedy, Seed: uint64(i), MaxTokens: 6 + 2*i,
			Logprobs: i%2 == 0, TopLogprobs: i % 3})
	}
	gen := func(p Policy, rs []GenRequest, together bool) []*Generation {
		t.Helper()
		eng := NewEngine(p, 0)
		defer eng.Close()
		out := make([]*Generation, len(rs))
		var wg sync.WaitGroup
		for i, r := range rs {
			wg.Add(1)
			do := func() {
				defer wg.Done()
				g, err := eng.Generate(context.Background(), r, nil)
				if err != nil {
					t.Error(err)
					return
				}
				out[i] = g
			}
			if together {
				go do()
			} else {
				do()
			}
		}
		wg.Wait()
		return out
	}
	host := gen(NewModelPolicy(m, 3, 512), reqs, true)
	dp := &hostSampler{ModelPolicy: NewModelPolicy(m, 3, 512)}
	dev := gen(dp, reqs, true)
	tokens, keptWant := 0, 0
	for i := range reqs {
		if host[i] == nil || dev[i] == nil {
			t.Fatal("a request failed")
		}
		if !slices.Equal(dev[i].IDs(), host[i].IDs()) || dev[i].Finish != host[i].Finish {
			t.Fatalf("request %d: device path %v (%s), host path %v (%s)", i, dev[i].IDs(), dev[i].Finish, host[i].IDs(), host[i].Finish)
		}
		for k, w := range host[i].Tokens {
			g := dev[i].Tokens[k]
			if math.Abs(float64(g.SampleLogprob-w.SampleLogprob)) > logprobTol || math.Abs(float64(g.Logprob-w.Logprob)) > logprobTol || len(g.Top) != len(w.Top) {
				t.Fatalf("request %d token %d: device path %+v, host path %+v", i, k, g, w)
			}
			for a := range w.Top {
				if g.Top[a].ID != w.Top[a].ID || math.Abs(float64(g.Top[a].Logprob-w.Top[a].Logprob)) > logprobTol {
					t.Fatalf("request %d token %d: alternatives %v, host path %v", i, k, g.Top, w.Top)
				}
			}
		}
		tokens += len(dev[i].Tokens)
		if reqs[i].Logprobs || reqs[i].TopLogprobs > 0 {
			keptWant += len(dev[i].Tokens)
		}
	}
	t.Logf("%d tokens: %d rows through FeedSample, %d kept", tokens, dp.rows, dp.kept)
	if dp.rows != tokens || dp.kept != keptWant {
		t.Errorf("%d rows through FeedSample and %d kept, want %d and %d", dp.rows, dp.kept, tokens, keptWant)
	}

	hot := slices.Clone(reqs)
	for i := range hot {
		hot[i].Sampling = model.Sampling{Temperature: 1, TopP: 1, TopK: -1}
		if i%3 == 1 {
			hot[i].Sampling.TopK = 20
		}
	}
	alone := gen(&hostSampler{ModelPolicy: NewModelPolicy(m, 1, 512)}, hot, false)
	together := gen(&hostSampler{ModelPolicy: NewModelPolicy(m, 4, 512)}, hot, true)
	for i := range hot {
		if !slices.Equal(alone[i].IDs(), together[i].IDs()) {
			t.Errorf("request %d at temperature 1: together %v, alone %v", i, together[i].IDs(), alone[i].IDs())
		}
	}
}
