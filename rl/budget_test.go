package rl

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
)

// TestBudgetsNameTheirCut runs each budget until it cuts and checks the
// finish reason it leaves, in whole and in step mode; and that in step mode
// a window that forgets keeps a trajectory going past the model's window.
func TestBudgetsNameTheirCut(t *testing.T) {
	f := newStepFixture(t)
	call, ans := f.enc(callAlpha), f.enc(answer)
	sample := []data.Sample{f.samples[0]}
	run := func(trajectory string, ctx env.ContextConfig, maxLen, maxResponse int, turns ...[]int32) *Trajectory {
		t.Helper()
		p := &scriptedPolicy{vocab: f.tok.VocabSize(), slots: 1, maxLen: maxLen, tok: f.tok, state: make([]slotState, 1),
			scripts: map[string][][]int32{"alpha": turns}}
		cfg := testRolloutConfig()
		cfg.Trajectory, cfg.MaxResponseTokens = trajectory, maxResponse
		envCfg := env.DefaultConfig()
		envCfg.Context = ctx
		trajs, err := f.rollout(t, cfg, envCfg, p, echoTool{}).Run(context.Background(), 0, sample)
		if err != nil {
			t.Fatal(err)
		}
		return trajs[0]
	}
	whole := run(TrajectoryWhole, fullContext, 4096, 2000, call, call, ans)
	n := len(whole.Tokens) // the whole trajectory's length
	window := env.ContextConfig{Policy: env.ContextWindow, Turns: 1}
	for _, c := range []struct {
		name       string
		trajectory string
		ctx        env.ContextConfig
		maxLen     int
		maxResp    int
		want       Finish
	}{
		{"whole, room for all", TrajectoryWhole, fullContext, n + 1, 2000, FinishAnswer},
		{"whole, window one short", TrajectoryWhole, fullContext, n, 2000, FinishContext},
		{"whole, budget one short", TrajectoryWhole, fullContext, 4096, n - whole.PromptLen - 1, FinishLength},
		{"step full, window one short", TrajectoryStep, fullContext, n, 2000, FinishContext},
		{"step full, budget one short", TrajectoryStep, fullContext, 4096, n - whole.PromptLen - 1, FinishLength},
		{"step window, window one short", TrajectoryStep, window, n, 2000, FinishAnswer},
		{"step window, budget one short", TrajectoryStep, window, n, n - whole.PromptLen - 1, FinishLength},
	} {
		tr := run(c.trajectory, c.ctx, c.maxLen, c.maxResp, call, call, ans)
		if tr.Finish != c.want {
			t.Errorf("%s: finish %s, want %s", c.name, tr.Finish, c.want)
		}
		if c.want == FinishAnswer && !slices.Equal(tr.Tokens, whole.Tokens) {
			t.Errorf("%s: the transcript differs from the uncut one", c.name)
		}
	}
	if got := RolloutMetrics([]*Trajectory{{Finish: FinishContext, TruncatedResponses: 2}, {Finish: FinishAnswer}}); got["env/finish_context"] != 0.5 || got["env/truncated_tool_responses"] != 1 {
		t.Errorf("metrics %v", got)
	}
}

// TestTruncationPenaltyAndMask: the penalty reaches the truncated
// trajectories' outcome only; mask takes their tokens out of the loss and
// leaves the advantage mask (and the estimator's view) alone.
func TestTruncationPenaltyAndMask(t *testing.T) {
	f := newStepFixture(t)
	trajs, _ := f.run(t, TrajectoryWhole, fullContext)
	trajs[1].Finish, trajs[4].Finish = FinishTurnLimit, FinishContext
	cfg := DefaultTrainerConfig()
	cfg.Rollout.TruncationPenalty, cfg.Rollout.TruncationLoss = -2, TruncationMask
	tr := &Trainer{Cfg: cfg}
	b, err := tr.score(trajs, nil, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range trajs {
		s, e := b.Seq(i)
		var sum float64
		for k := s; k < e; k++ {
			sum += b.Scores[k]
		}
		want := trajs[i].Outcome.Reward
		if i == 1 || i == 4 {
			want -= 2
		}
		if sum != want {
			t.Errorf("trajectory %d: score %v, want %v", i, sum, want)
		}
	}
	adv := slices.Clone(b.AdvantageMask)
	m := Metrics{}
	if err := markTruncated(b, trajs); err != nil {
		t.Fatal(err)
	}
	if err := tr.maskTruncation(b, m); err != nil {
		t.Fatal(err)
	}
	if m["rollout/truncation_masked"] != 2 || !slices.Equal(adv, b.AdvantageMask) {
		t.Errorf("masked %v; advantage mask changed: %v", m["rollout/truncation_masked"], !slices.Equal(adv, b.AdvantageMask))
	}
	for i := range trajs {
		s, e := b.Seq(i)
		n := countTrue(b.ActionMask[s:e])
		if (i == 1 || i == 4) != (n == 0) {
			t.Errorf("trajectory %d (%s): %d action tokens left", i, trajs[i].Finish, n)
		}
	}
	// Everything truncated: nothing would be left to train, so nothing is masked.
	for _, x := range trajs {
		x.Finish = FinishLength
	}
	b2 := FromTrajectories(trajs, true)
	if err := markTruncated(b2, trajs); err != nil {
		t.Fatal(err)
	}
	if n, err := maskTruncated(b2); err != nil || n != 0 || countTrue(b2.ActionMask) == 0 {
		t.Errorf("all truncated: masked %d (%v)", n, err)
	}
	bad := DefaultRolloutConfig()
	bad.TruncationLoss = "drop"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "rollout.truncation_loss \"drop\"") {
		t.Errorf("truncation_loss drop: %v", err)
	}
}
