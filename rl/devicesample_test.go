package rl

import (
	"context"
	"slices"
	"testing"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/model"
)

// hostSampler is a CPU ModelPolicy that claims to sample on its device:
// FeedSample is model.StepSample's host fallback, so the rollout's device
// path (per-trajectory seeds, kept rows, followers drawing from their
// leader's row) runs without a GPU. cuda/rollout_test.go runs the real one.
type hostSampler struct {
	*ModelPolicy
	rows, kept int
}

func (h *hostSampler) SamplesOnDevice() bool { return true }
func (h *hostSampler) FeedSample(chunks []model.Chunk, s model.Sampling, seeds []uint64, keep []int) (model.Decoded, error) {
	h.rows += len(chunks)
	h.kept += len(keep)
	return h.M.StepSample(h.Cache, chunks, s, seeds, keep)
}

// TestRolloutDeviceSamplingPath: with greedy decoding the device path
// gives the host path's trajectories token for token; every drawn token
// but each follower's first goes through FeedSample, and each group's
// prefill keeps exactly its leader's row. With temperature 1 the device
// path is reproducible: the same seed gives the same trajectories.
func TestRolloutDeviceSamplingPath(t *testing.T) {
	m, tok := loadWarmstart(t)
	var stop []int32
	for _, s := range []string{"</tool_call>", "<|im_end|>"} {
		id, _ := tok.TokenID(s)
		stop = append(stop, int32(id))
	}
	const groups, n = 2, 3
	samples := []data.Sample{{ID: "a", Question: "what is alpha?", Answers: []string{"gamma"}},
		{ID: "b", Question: "who founded beta?", Answers: []string{"delta"}}}
	budget := 0
	run := func(p Policy, s model.Sampling) []*Trajectory {
		t.Helper()
		cfg := testRolloutConfig()
		cfg.N, cfg.MaxTurnTokens, cfg.MaxResponseTokens, cfg.Deterministic, cfg.Sampling, cfg.Seed = n, 12, 30, true, s, 3
		cfg.PrefillTokens, cfg.Slots = budget, groups*n
		e, err := env.New(env.DefaultConfig(), echoTool{})
		if err != nil {
			t.Fatal(err)
		}
		r := &Rollout{Cfg: &cfg, Policy: p, Tok: tok, Env: e, Stop: stop}
		trajs, err := r.Run(context.Background(), 0, samples)
		if err != nil {
			t.Fatal(err)
		}
		return trajs
	}
	same := func(a, b []*Trajectory) bool {
		for i := range a {
			if !slices.Equal(a[i].Tokens, b[i].Tokens) || !slices.Equal(a[i].Action, b[i].Action) ||
				!slices.Equal(a[i].LogProb, b[i].LogProb) || a[i].Finish != b[i].Finish {
				return false
			}
		}
		return len(a) == len(b)
	}
	host := run(NewModelPolicy(m, groups*n, 1024), model.Greedy)
	dp := &hostSampler{ModelPolicy: NewModelPolicy(m, groups*n, 1024)}
	dev := run(dp, model.Greedy)
	if !same(host, dev) {
		t.Fatal("greedy trajectories differ between the host and the device sampling paths")
	}
	drawn := 0
	for _, tr := range dev {
		for _, a := range tr.Action {
			if a {
				drawn++
			}
		}
	}
	t.Logf("%d tokens drawn, %d rows through FeedSample, %d kept", drawn, dp.rows, dp.kept)
	if dp.rows != drawn-groups*(n-1) || dp.kept != groups {
		t.Errorf("%d rows through FeedSample and %d kept, want %d and %d", dp.rows, dp.kept, drawn-groups*(n-1), groups)
	}
	hot := model.Sampling{Temperature: 1, TopP: 1, TopK: -1}
	a := run(&hostSampler{ModelPolicy: NewModelPolicy(m, groups*n, 1024)}, hot)
	b := run(&hostSampler{ModelPolicy: NewModelPolicy(m, groups*n, 1024)}, hot)
	if !same(a, b) {
		t.Error("the device path is not reproducible under one seed")
	}
	if slices.Equal(a[0].Tokens, a[1].Tokens) && slices.Equal(a[1].Tokens, a[2].Tokens) {
		t.Error("the three samples of one prompt drew the same tokens at temperature 1")
	}
	// A prefill budget of one token past the slots feeds prompts and
	// observations in pieces; on both paths every trajectory draws what it
	// drew with each fed whole (a cut chunk draws nothing and takes nothing
	// from its stream), with log-probabilities equal up to the order of
	// the additions (a piece attends to the cache of the pieces before it).
	near := func(a, b []*Trajectory) bool {
		for i := range a {
			if !slices.Equal(a[i].Tokens, b[i].Tokens) || !slices.Equal(a[i].Action, b[i].Action) || a[i].Finish != b[i].Finish {
				return false
			}
			for k := range a[i].LogProb {
				if d := a[i].LogProb[k] - b[i].LogProb[k]; d > 1e-4 || d < -1e-4 {
					return false
				}
			}
		}
		return len(a) == len(b)
	}
	hostHot := run(NewModelPolicy(m, groups*n, 1024), hot)
	budget = groups*n + 1
	if !near(hostHot, run(NewModelPolicy(m, groups*n, 1024), hot)) {
		t.Error("host path: a prefill budget changed the trajectories")
	}
	if !near(a, run(&hostSampler{ModelPolicy: NewModelPolicy(m, groups*n, 1024)}, hot)) {
		t.Error("device path: a prefill budget changed the trajectories")
	}
}

// TestRolloutSeedAndStep: rollout.seed and the step number choose the
// sampling streams (RolloutConfig.StepSeed), so the same pair repeats a
// rollout token for token and another seed or step draws another one.
func TestRolloutSeedAndStep(t *testing.T) {
	m, tok := loadWarmstart(t)
	id, _ := tok.TokenID("<|im_end|>")
	samples := []data.Sample{{ID: "a", Question: "what is alpha?", Answers: []string{"gamma"}}}
	run := func(seed uint64, step int) []int32 {
		t.Helper()
		cfg := testRolloutConfig()
		cfg.N, cfg.MaxTurnTokens, cfg.MaxResponseTokens, cfg.Deterministic, cfg.Seed = 2, 24, 48, true, seed
		e, err := env.New(env.DefaultConfig(), echoTool{})
		if err != nil {
			t.Fatal(err)
		}
		r := &Rollout{Cfg: &cfg, Policy: NewModelPolicy(m, 2, 1024), Tok: tok, Env: e, Stop: []int32{int32(id)}}
		trajs, err := r.Run(context.Background(), step, samples)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Concat(trajs[0].Tokens, trajs[1].Tokens)
	}
	a := run(1, 0)
	if !slices.Equal(a, run(1, 0)) {
		t.Fatal("the same seed and step drew different rollouts")
	}
	if slices.Equal(a, run(2, 0)) || slices.Equal(a, run(1, 1)) {
		t.Fatal("another seed or step drew the same rollout")
	}
}
