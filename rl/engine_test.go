package rl

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/tokenizer"
)

func loadWarmstart(t testing.TB) (*model.Model, *tokenizer.Tokenizer) {
	dir := "../cmd/train/testdata/warmstart"
	m, err := model.Load(dir, model.NewCPU(), model.LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m, tok
}

// TestEngineConcurrentEqualsAlone: requests decoded together, more of
// them than there are slots so that they queue and join mid-flight,
// sample exactly the tokens each samples alone with its seed.
func TestEngineConcurrentEqualsAlone(t *testing.T) {
	m, tok := loadWarmstart(t)
	stop := []int32{}
	for _, s := range []string{"</tool_call>", "<|im_end|>"} {
		id, _ := tok.TokenID(s)
		stop = append(stop, int32(id))
	}
	var reqs []GenRequest
	for i := 0; i < 10; i++ {
		ids, err := tok.EncodeChat([]tokenizer.Message{{Role: "user", Content: fmt.Sprintf("Question: Who is the founder of the employer of person %d?", i)}}, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, GenRequest{Prompt: toInt32(ids), Sampling: model.Sampling{Temperature: 1, TopP: 0.95, TopK: -1},
			Seed: uint64(i), MaxTokens: 8 + 4*i, Stop: stop, Logprobs: i%2 == 0, TopLogprobs: i % 3})
	}
	alone := NewEngine(NewModelPolicy(m, 1, 512), 0)
	want := make([]*Generation, len(reqs))
	for i, r := range reqs {
		g, err := alone.Generate(context.Background(), r, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = g
	}
	alone.Close()

	// Together in 4 slots, each prompt fed whole, then fed in pieces of a
	// 6-token prefill budget (the prompts are about 30 tokens).
	for _, budget := range []int{0, 6} {
		t.Run(fmt.Sprint("prefill_tokens=", budget), func(t *testing.T) {
			engineMatches(t, NewEngine(NewModelPolicy(m, 4, 512), budget), reqs, want)
		})
	}
}

// engineMatches runs reqs on eng concurrently and compares each with want,
// its generation alone.
func engineMatches(t *testing.T, eng *Engine, reqs []GenRequest, want []*Generation) {
	defer eng.Close()
	got := make([]*Generation, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var streamed []int32
			g, err := eng.Generate(context.Background(), r, func(tk GenToken) bool { streamed = append(streamed, tk.ID); return false })
			if err != nil {
				t.Error(err)
				return
			}
			if !slices.Equal(streamed, g.IDs()) {
				t.Errorf("request %d: streamed %v, returned %v", i, streamed, g.IDs())
			}
			got[i] = g
		}()
	}
	wg.Wait()
	for i := range reqs {
		if got[i] == nil {
			continue
		}
		if !slices.Equal(got[i].IDs(), want[i].IDs()) || got[i].Finish != want[i].Finish {
			t.Errorf("request %d: together %v (%s), alone %v (%s)", i, got[i].IDs(), got[i].Finish, want[i].IDs(), want[i].Finish)
		}
		if n := len(got[i].Tokens); got[i].Finish == "length" && n != reqs[i].MaxTokens {
			t.Errorf("request %d: %d tokens for max_tokens %d", i, n, reqs[i].MaxTokens)
		}
		for k, tk := range got[i].Tokens {
			w := want[i].Tokens[k]
			if d := tk.SampleLogprob - w.SampleLogprob; d > 1e-4 || d < -1e-4 {
				t.Errorf("request %d token %d: log-prob %v together, %v alone", i, k, tk.SampleLogprob, w.SampleLogprob)
			}
			if len(tk.Top) != reqs[i].TopLogprobs {
				t.Errorf("request %d token %d: %d alternatives", i, k, len(tk.Top))
			}
		}
	}
}

// TestEngineLogprobsMatchForward: the log-probabilities the engine reports
// equal log-softmax of the logits of an independent full forward pass over
// the prompt and the generated tokens.
func TestEngineLogprobsMatchForward(t *testing.T) {
	m, tok := loadWarmstart(t)
	ids, _ := tok.EncodeChat([]tokenizer.Message{{Role: "user", Content: "Question: Who is the founder of the employer of Disonrar?"}}, nil, true)
	eng := NewEngine(NewModelPolicy(m, 2, 512), 0)
	defer eng.Close()
	g, err := eng.Generate(context.Background(), GenRequest{Prompt: toInt32(ids), Sampling: model.Sampling{Temperature: 1, TopP: 1, TopK: -1},
		Seed: 3, MaxTokens: 12, Logprobs: true, TopLogprobs: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	seq := append(toInt32(ids), g.IDs()...)
	b := &Batch{Tokens: seq, Offsets: []int{0, len(seq)}}
	lp, _, _, err := Forward(m, b, 4096)
	if err != nil {
		t.Fatal(err)
	}
	for k, tk := range g.Tokens {
		ref := lp[len(ids)+k]
		if d := float64(tk.Logprob) - ref; d > 1e-3 || d < -1e-3 {
			t.Errorf("token %d: engine log-prob %v, forward %v", k, tk.Logprob, ref)
		}
		// At temperature 1 without truncation the sampler's value is the same.
		if d := float64(tk.SampleLogprob) - ref; d > 1e-3 || d < -1e-3 {
			t.Errorf("token %d: sampler log-prob %v, forward %v", k, tk.SampleLogprob, ref)
		}
		if tk.Top[0].Logprob < tk.Logprob-1e-6 {
			t.Errorf("token %d: best alternative %v below the token's %v", k, tk.Top[0].Logprob, tk.Logprob)
		}
	}
}
