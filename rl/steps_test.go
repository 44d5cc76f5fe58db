package rl

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/env"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu"
	"github.com/r1go/r1go/optim"
)

// stepFixture rolls out two prompts, three samples each: "alpha" searches
// twice and answers (three turns), "beta" searches once and answers.
type stepFixture struct {
	rolloutFixture
	samples []data.Sample
}

func newStepFixture(t *testing.T) stepFixture {
	return stepFixture{rolloutFixture: newRolloutFixture(t), samples: []data.Sample{
		{ID: "a", Question: "what is alpha?", Answers: []string{"gamma"}},
		{ID: "b", Question: "what is beta?", Answers: []string{"delta"}},
	}}
}

func (f stepFixture) run(t *testing.T, trajectory string, ctx env.ContextConfig) ([]*Trajectory, *scriptedPolicy) {
	return f.runN(t, trajectory, ctx, 3, f.samples)
}

func (f stepFixture) runN(t *testing.T, trajectory string, ctx env.ContextConfig, n int, samples []data.Sample) ([]*Trajectory, *scriptedPolicy) {
	t.Helper()
	p := &scriptedPolicy{vocab: f.tok.VocabSize(), slots: 6, maxLen: 4096, tok: f.tok, state: make([]slotState, 6),
		scripts: map[string][][]int32{
			"alpha": {f.enc(callAlpha), f.enc(callBeta), f.enc(answer)},
			"beta":  {f.enc(callBeta), f.enc(answer)},
			"gamma": {f.enc(answer)},
		}}
	cfg := testRolloutConfig()
	cfg.N, cfg.Deterministic, cfg.Trajectory = n, true, trajectory
	envCfg := env.DefaultConfig()
	envCfg.Context = ctx
	trajs, err := f.rollout(t, cfg, envCfg, p, echoTool{}).Run(context.Background(), 0, samples)
	if err != nil {
		t.Fatal(err)
	}
	return trajs, p
}

var fullContext = env.ContextConfig{Policy: env.ContextFull, Turns: 1}

// TestStepFullIsWhole: step mode with the full context rolls out the
// transcripts whole mode does, token for token, and merging packs them
// into the batch whole mode packs; without merging each turn is a
// sequence whose prompt is the whole context before it.
func TestStepFullIsWhole(t *testing.T) {
	f := newStepFixture(t)
	whole, _ := f.run(t, TrajectoryWhole, fullContext)
	step, p := f.run(t, TrajectoryStep, fullContext)
	if p.rewrites != 0 {
		t.Errorf("%d context rewrites under the full policy", p.rewrites)
	}
	for i := range whole {
		w, s := whole[i], step[i]
		if !slices.Equal(w.Tokens, s.Tokens) || !slices.Equal(w.Action, s.Action) || !slices.Equal(w.LogProb, s.LogProb) ||
			!slices.Equal(w.ToolCallEnds, s.ToolCallEnds) || w.Finish != s.Finish || w.Turns != s.Turns || w.Outcome.Reward != s.Outcome.Reward {
			t.Fatalf("trajectory %d: step mode's transcript differs from whole mode's", i)
		}
		if w.Steps != nil || len(s.Steps) != s.Turns {
			t.Fatalf("trajectory %d: %d turn samples in whole mode, %d for %d turns in step mode", i, len(w.Steps), len(s.Steps), s.Turns)
		}
		for k, st := range s.Steps {
			if st.Rewrite || (k > 0 && !env.Extends(st.Prompt, append(slices.Clone(s.Steps[k-1].Prompt), s.Steps[k-1].Response...))) {
				t.Fatalf("trajectory %d turn %d: the full context does not extend the last turn", i, k)
			}
		}
	}
	wb := FromTrajectories(whole, true)
	sb, pk, err := FromSteps(step, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(wb.Tokens, sb.Tokens) || !slices.Equal(wb.Offsets, sb.Offsets) || !slices.Equal(wb.PromptLen, sb.PromptLen) ||
		!slices.Equal(wb.Group, sb.Group) || !slices.Equal(wb.ActionMask, sb.ActionMask) || !slices.Equal(wb.SampleLogProb, sb.SampleLogProb) {
		t.Fatal("the merged step batch differs from the whole batch")
	}
	if pk.MergeRate() != 1 || pk.Turns != 15 || pk.Seqs != 6 {
		t.Errorf("packing %+v (merge rate %v), want 15 turns in 6 sequences, all merged", pk, pk.MergeRate())
	}
	ub, upk, err := FromSteps(step, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if ub.NumSeqs() != 15 || upk.MergeRate() != 0 || ub.NumTokens() <= sb.NumTokens() {
		t.Errorf("unmerged: %d sequences of %d tokens (merged %d), merge rate %v", ub.NumSeqs(), ub.NumTokens(), sb.NumTokens(), upk.MergeRate())
	}
	if countTrue(ub.ActionMask) != countTrue(sb.ActionMask) {
		t.Errorf("unmerged batch has %d action tokens, merged %d", countTrue(ub.ActionMask), countTrue(sb.ActionMask))
	}
}

func countTrue(m []bool) int {
	n := 0
	for _, x := range m {
		if x {
			n++
		}
	}
	return n
}

// TestStepContextPolicies: window and drop_observations rewrite the
// context of alpha's third turn (K = 1), the rollout refills the cache from
// it, the transcript stays whole mode's, and the packer starts a new
// sequence at the rewrite.
func TestStepContextPolicies(t *testing.T) {
	f := newStepFixture(t)
	whole, _ := f.run(t, TrajectoryWhole, fullContext)
	for _, pol := range []env.ContextPolicy{env.ContextWindow, env.ContextDropObservations} {
		t.Run(string(pol), func(t *testing.T) {
			step, p := f.run(t, TrajectoryStep, env.ContextConfig{Policy: pol, Turns: 1})
			if p.rewrites != 3 {
				t.Errorf("%d rewrites, want 3 (alpha's third turn, three samples)", p.rewrites)
			}
			a := step[0]
			if !slices.Equal(a.Tokens, whole[0].Tokens) || a.Outcome.Reward != 1 {
				t.Fatalf("transcript differs from whole mode's or lost its reward (%v)", a.Outcome.Reward)
			}
			if len(a.Steps) != 3 || a.Steps[1].Rewrite || !a.Steps[2].Rewrite {
				t.Fatalf("rewrites %v %v %v, want only the third turn", a.Steps[0].Rewrite, a.Steps[1].Rewrite, a.Steps[2].Rewrite)
			}
			// Rebuild the third prompt from the turns' own tokens.
			p0, r0, r1 := a.Steps[0].Prompt, a.Steps[0].Response, a.Steps[1].Response
			o0 := a.Steps[1].Prompt[len(p0)+len(r0):]
			o1 := a.Tokens[len(p0)+len(r0)+len(o0)+len(r1) : len(a.Tokens)-len(a.Steps[2].Response)]
			var want []int32
			switch pol {
			case env.ContextWindow:
				want = slices.Concat(p0, r1, o1)
			case env.ContextDropObservations:
				elided := f.enc(f.elided(t, callAlpha))
				want = slices.Concat(p0, r0, elided, r1, o1)
			}
			if !slices.Equal(a.Steps[2].Prompt, want) {
				t.Fatalf("third prompt\n got %q\nwant %q", f.tok.Decode(toInts(a.Steps[2].Prompt)), f.tok.Decode(toInts(want)))
			}
			b, pk, err := FromSteps(step, true, true)
			if err != nil {
				t.Fatal(err)
			}
			// alpha: turns 0-1 merged, turn 2 alone; beta: one sequence.
			if pk.Seqs != 9 || pk.Merged != 6 || !slices.Equal(b.Traj, []int{0, 0, 1, 1, 2, 2, 3, 4, 5}) {
				t.Errorf("packing %+v, traj %v", pk, b.Traj)
			}
		})
	}
}

// elided is the observation the QA env answers turn with, tool result
// elided.
func (f stepFixture) elided(t *testing.T, turn string) string {
	e, err := env.New(env.DefaultConfig(), echoTool{})
	if err != nil {
		t.Fatal(err)
	}
	ep := e.NewEpisode()
	ep.Reset(f.samples[0])
	return ep.Step(context.Background(), turn).Elided
}

// TestStepFullSameGradients is the step-mode contract for an outcome
// estimator: GRPO on step mode with the full context gives the gradients
// of whole mode, bit for bit when the turns are merged (the same batch)
// and up to float rounding when every turn is a sequence of its own (the
// same action tokens under the same contexts, computed in other batches).
func TestStepFullSameGradients(t *testing.T) {
	f := newStepFixture(t)
	// Six prompts of one, two and three turns, regrouped into two groups of
	// three different trajectories (the samples of one scripted prompt are
	// all alike, and GRPO's gradient over alike samples is zero).
	var samples []data.Sample
	for i, q := range []string{"alpha", "beta", "gamma", "gamma", "alpha", "beta"} {
		samples = append(samples, data.Sample{ID: fmt.Sprint(i), Question: "what is " + q + "?", Answers: []string{"gamma"}})
	}
	whole, _ := f.runN(t, TrajectoryWhole, fullContext, 1, samples)
	step, _ := f.runN(t, TrajectoryStep, fullContext, 1, samples)
	for _, set := range [][]*Trajectory{whole, step} {
		for i, tr := range set {
			tr.Group, tr.Outcome.Reward = i/3, float64(i%3)-0.5
		}
	}
	m := vocabModel(t, f.tok.VocabSize())
	cfg := DefaultTrainerConfig()
	cfg.Actor.UseKLLoss = false
	grads := func(trajs []*Trajectory, trajectory string, merge bool) []float32 {
		c := cfg
		c.Rollout.Trajectory, c.Rollout.MergePrefix = trajectory, merge
		tr := &Trainer{Cfg: c, Policy: m}
		b, err := tr.score(trajs, nil, Metrics{})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.RewardsFromScores(); err != nil {
			t.Fatal(err)
		}
		if err := Estimate(b, &c.Algorithm.AdvantageConfig); err != nil {
			t.Fatal(err)
		}
		return actorGrads(t, m, b, &c.Actor.LossConfig)
	}
	gw := grads(whole, TrajectoryWhole, true)
	gm := grads(step, TrajectoryStep, true)
	gu := grads(step, TrajectoryStep, false)
	if !slices.Equal(gw, gm) {
		t.Error("merged step mode's gradients differ from whole mode's")
	}
	var num, den float64
	for i := range gw {
		d := float64(gu[i] - gw[i])
		num, den = num+d*d, den+float64(gw[i])*float64(gw[i])
	}
	rel := math.Sqrt(num / den)
	t.Logf("unmerged step mode: relative L2 gradient error %.3g (gradient norm² %.3g)", rel, den)
	if !(rel < 1e-5) || den == 0 {
		t.Errorf("unmerged step mode's gradients: relative L2 error %.3g from whole mode's (norm² %.3g)", rel, den)
	}
}

// vocabModel is a random two-layer Qwen2 of the given vocabulary on the
// CPU, long enough for the step fixture's trajectories.
func vocabModel(t *testing.T, vocab int) *model.Model {
	t.Helper()
	raw := fmt.Sprintf(`{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 16,
		"intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
		"num_key_value_heads": 1, "vocab_size": %d, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
		"max_position_embeddings": 4096, "hidden_act": "silu", "initializer_range": 0.2,
		"tie_word_embeddings": true, "use_sliding_window": false, "torch_dtype": "float32"}`, vocab)
	cfg, err := model.ParseConfig([]byte(raw), "test config")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, cpu.New(), model.LMHeadOutput)
	if err != nil {
		t.Fatal(err)
	}
	m.InitRandom(5)
	return m
}

// actorGrads is one token-mean actor loss's parameter gradients over b.
func actorGrads(t *testing.T, m *model.Model, b *Batch, lc *LossConfig) []float32 {
	t.Helper()
	m.ZeroGrads()
	res, err := m.Forward(modelBatch(b), true)
	if err != nil {
		t.Fatal(err)
	}
	b.LogProb = shiftIn(b, nil, res.LogProb)
	b.Entropy = shiftIn(b, nil, res.Entropy)
	b.OldLogProb = b.LogProb
	norm, err := NewNorm(lc.AggMode, b, lc.LossScaleFactor)
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	if err := ActorLoss(b, lc, norm, &out); err != nil {
		t.Fatal(err)
	}
	if err := m.Backward(shiftOut(b, out.DLogProb), shiftOut(b, out.DEntropy), nil); err != nil {
		t.Fatal(err)
	}
	g := make([]float32, m.Grads.Len())
	m.Dev.Download(g, m.Grads)
	return g
}

// TestTurnRewards: process rewards land on the last token of their turn,
// across the sequences of a rewritten context, with the outcome on the
// last turn; on a whole batch they land where AddProcessRewards puts them
// (each turn here ends at its </tool_call>).
func TestTurnRewards(t *testing.T) {
	f := newStepFixture(t)
	step, _ := f.run(t, TrajectoryStep, env.ContextConfig{Policy: env.ContextWindow, Turns: 1})
	whole, _ := f.run(t, TrajectoryWhole, fullContext)
	for _, set := range [][]*Trajectory{step, whole} {
		for _, tr := range set {
			for k := range tr.ProcessRewards {
				tr.ProcessRewards[k] = 0.1 * float64(k+1)
			}
		}
	}
	cfg := DefaultTrainerConfig()
	cfg.Algorithm.ProcessReward = true
	cfg.Rollout.Trajectory, cfg.Rollout.MergePrefix = TrajectoryStep, true
	tr := &Trainer{Cfg: cfg}
	m := Metrics{}
	b, err := tr.score(step, nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if m["rollout/merge_rate"] != 6.0/9 || m["rollout/sequences"] != 9 || m["rollout/turn_samples"] != 15 {
		t.Errorf("metrics %v", m)
	}
	// Alpha: sequence 0 holds turns 0 and 1, sequence 1 turn 2.
	var got []float64
	for k := 0; k < b.Offsets[2]; k++ {
		if b.Scores[k] != 0 {
			if !b.ActionMask[k] || (k+1 < b.NumTokens() && b.ActionMask[k+1]) {
				t.Errorf("score %v at token %d, not the last of a turn", b.Scores[k], k)
			}
			got = append(got, b.Scores[k])
		}
	}
	if !slices.Equal(got, []float64{0.1, 0.2, 1}) {
		t.Errorf("alpha's scores %v, want 0.1 and 0.2 after its searches and its outcome 1", got)
	}
	wb := FromTrajectories(whole, true)
	byTurn := FromTrajectories(whole, true)
	rs := make([][]float64, len(whole))
	for i, tr := range whole {
		rs[i] = tr.ProcessRewards
	}
	if err := AddProcessRewards(wb, f.stop[0], rs, true); err != nil {
		t.Fatal(err)
	}
	if err := AddTurnRewards(byTurn, rs, true); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(wb.Scores, byTurn.Scores) {
		t.Error("AddTurnRewards and AddProcessRewards place a whole batch's rewards apart")
	}
}

// TestTeacherSteps: in step mode the warm start's trajectory holds the turn
// samples the rollout would record for the same turns, prompts built by the
// same context policy, and SFTStep packs them.
func TestTeacherSteps(t *testing.T) {
	f := newStepFixture(t)
	ctx := env.ContextConfig{Policy: env.ContextWindow, Turns: 1}
	step, _ := f.run(t, TrajectoryStep, ctx)
	cfg := testRolloutConfig()
	cfg.Trajectory = TrajectoryStep
	envCfg := env.DefaultConfig()
	envCfg.Context = ctx
	r := f.rollout(t, cfg, envCfg, nil, echoTool{})
	turns := []string{callAlpha, callBeta, strings.TrimSuffix(answer, "<|im_end|>")}
	tr, err := r.Teacher(context.Background(), f.samples[0], turns, f.stop[1])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tr.Tokens, step[0].Tokens) || len(tr.Steps) != 3 {
		t.Fatalf("teacher: %d tokens and %d turn samples; the rollout %d and %d", len(tr.Tokens), len(tr.Steps), len(step[0].Tokens), len(step[0].Steps))
	}
	for k, st := range tr.Steps {
		want := step[0].Steps[k]
		if !slices.Equal(st.Prompt, want.Prompt) || !slices.Equal(st.Response, want.Response) || st.Rewrite != want.Rewrite {
			t.Errorf("turn %d: the teacher's sample differs from the rollout's", k)
		}
	}
	m := vocabModel(t, f.tok.VocabSize())
	opt, err := optim.New(m.Dev, m.Params, m.Grads, optim.DefaultConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if loss, _, err := SFTStep(m, opt, []*Trajectory{tr}, 4096); err != nil || !(loss > 0) {
		t.Errorf("SFT on turn samples: loss %v, %v", loss, err)
	}
}

// summaryEnv is an environment with a context policy of its own: after
// each turn the context is the first prompt, a summary line it writes
// itself, and the last observation.
type summaryEnv struct{ *env.Env }

type summaryEpisode struct{ *env.ToolEnv }

func (e summaryEnv) Episode() env.Episode { return summaryEpisode{e.NewEpisode()} }

func (summaryEpisode) Context(h *env.History) []int32 {
	last := h.Turns[len(h.Turns)-1]
	note := h.Encode(fmt.Sprintf("<|im_start|>assistant\nI searched %d times.<|im_end|>\n", len(h.Turns)))
	return slices.Concat(h.Prompt, note, last.Response, last.Observation)
}

// TestStepOwnContext: an environment's own Contexter builds the contexts,
// the rollout refills the cache from each rewrite, and the turns it
// records verify.
func TestStepOwnContext(t *testing.T) {
	f := newStepFixture(t)
	e, err := env.New(env.DefaultConfig(), echoTool{})
	if err != nil {
		t.Fatal(err)
	}
	p := &scriptedPolicy{vocab: f.tok.VocabSize(), slots: 1, maxLen: 4096, tok: f.tok, state: make([]slotState, 1),
		scripts: map[string][][]int32{"alpha": {f.enc(callAlpha), f.enc(callBeta), f.enc(answer)}}}
	cfg := testRolloutConfig()
	cfg.Trajectory = TrajectoryStep
	r := &Rollout{Cfg: &cfg, Policy: p, Tok: f.tok, Env: summaryEnv{e}, Stop: f.stop}
	trajs, err := r.Run(context.Background(), 0, f.samples[:1])
	if err != nil {
		t.Fatal(err)
	}
	a := trajs[0]
	if a.Finish != FinishAnswer || len(a.Steps) != 3 || !a.Steps[1].Rewrite || !a.Steps[2].Rewrite || p.rewrites != 2 {
		t.Fatalf("finish %s, %d turns, rewrites %d", a.Finish, len(a.Steps), p.rewrites)
	}
	if got := f.tok.Decode(toInts(a.Steps[2].Prompt)); !strings.Contains(got, "I searched 2 times.") {
		t.Errorf("the third prompt lacks the environment's summary: %q", got)
	}
	if w := f.verifier().Trajectory(0, a); w != nil {
		t.Error(w)
	}
}
