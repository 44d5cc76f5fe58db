package rl

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func nanValue() float64 { return math.NaN() }

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
	if !strings.HasPrefix(err.Error(), "rl: ") {
		t.Fatalf("error %q does not start with the package name", err)
	}
}

// firstAction returns the index of the k-th action token of sequence i.
func firstAction(b *Batch, i, k int) int {
	s, e := b.Seq(i)
	for t := s; t < e; t++ {
		if b.ActionMask[t] {
			if k == 0 {
				return t
			}
			k--
		}
	}
	panic("no such action token")
}

func TestNonFiniteInputsAreErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	cfg := DefaultLossConfig()
	cfg.UseKLLoss, cfg.EntropyCoeff = true, 0.01
	cases := []struct {
		field string
		set   func(b *Batch, t int)
		run   func(b *Batch) error
	}{
		{"LogProb", func(b *Batch, t int) { b.LogProb[t] = math.NaN() }, func(b *Batch) error { _, err := actorLoss(cfg)(b); return err }},
		{"LogProb", func(b *Batch, t int) { b.LogProb[t] = math.Inf(1) }, func(b *Batch) error { _, err := actorLoss(cfg)(b); return err }},
		{"OldLogProb", func(b *Batch, t int) { b.OldLogProb[t] = math.Inf(-1) }, func(b *Batch) error { _, err := actorLoss(cfg)(b); return err }},
		{"Advantages", func(b *Batch, t int) { b.Advantages[t] = math.NaN() }, func(b *Batch) error { _, err := actorLoss(cfg)(b); return err }},
		{"RefLogProb", func(b *Batch, t int) { b.RefLogProb[t] = math.NaN() }, func(b *Batch) error { _, err := actorLoss(cfg)(b); return err }},
		{"Entropy", func(b *Batch, t int) { b.Entropy[t] = math.Inf(1) }, func(b *Batch) error { _, err := actorLoss(cfg)(b); return err }},
		{"Values", func(b *Batch, t int) { b.Values[t] = math.NaN() }, func(b *Batch) error { _, err := valueLoss(cfg)(b); return err }},
		{"Returns", func(b *Batch, t int) { b.Returns[t] = math.Inf(1) }, func(b *Batch) error { _, err := valueLoss(cfg)(b); return err }},
		{"LogProb", func(b *Batch, t int) { b.LogProb[t] = math.NaN() }, func(b *Batch) error {
			c := cfg
			c.PolicyLoss = "gspo"
			_, err := actorLoss(c)(b)
			return err
		}},
		{"Rewards", func(b *Batch, t int) { b.Rewards[t] = math.NaN() }, func(b *Batch) error { return Estimate(b, &AdvantageConfig{Estimator: "grpo"}) }},
		{"OldValues", func(b *Batch, t int) { b.OldValues[t] = math.Inf(1) }, func(b *Batch) error { return Estimate(b, &AdvantageConfig{Estimator: "gae", Gamma: 1, Lambda: 1}) }},
	}
	for _, c := range cases {
		b := randomBatch(rng, 6)
		tk := firstAction(b, 3, 0)
		c.set(b, tk)
		err := c.run(b)
		wantErr(t, err, c.field+"[", "(sequence 3, token "+strconv.Itoa(tk-b.Offsets[3])+")")
	}
}

func TestMaskedOutNaNIsIgnored(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	b := randomBatch(rng, 6)
	cfg := DefaultLossConfig()
	cfg.UseKLLoss, cfg.EntropyCoeff = true, 0.01
	ref, err := actorLoss(cfg)(b)
	if err != nil {
		t.Fatal(err)
	}
	for tk, m := range b.ActionMask {
		if !m {
			b.LogProb[tk], b.Entropy[tk], b.RefLogProb[tk] = math.NaN(), math.Inf(1), math.NaN()
		}
	}
	out, err := actorLoss(cfg)(b)
	if err != nil {
		t.Fatal(err)
	}
	if out.Loss != ref.Loss {
		t.Errorf("loss %v with NaN on masked-out tokens, %v without", out.Loss, ref.Loss)
	}
	for tk, g := range out.DLogProb {
		if g != ref.DLogProb[tk] {
			t.Fatalf("dlogprob[%d] = %v, want %v", tk, g, ref.DLogProb[tk])
		}
	}
}

func TestEmptyMasks(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	b := randomBatch(rng, 4)
	b.ActionMask = make([]bool, b.NumTokens())
	b.AdvantageMask = b.ActionMask
	for _, mode := range []AggMode{TokenMean, SeqMeanTokenSum, SeqMeanTokenMean} {
		_, err := NewNorm(mode, b, 0)
		wantErr(t, err, string(mode), "no action tokens")
	}
	wantErr(t, GAE(b, &AdvantageConfig{Gamma: 1, Lambda: 1}), "whitening", "at least 2")
	wantErr(t, ReinforcePlusPlus(b, &AdvantageConfig{Gamma: 1}), "whitening")
	// GRPO over empty masks is well defined: every score is 0.
	if err := GRPO(b, &AdvantageConfig{NormAdvByStd: true}); err != nil {
		t.Fatal(err)
	}
	for tk, a := range b.Advantages {
		if a != 0 {
			t.Fatalf("advantage[%d] = %v with an empty mask", tk, a)
		}
	}
	// A single action token cannot be whitened (unbiased variance needs 2).
	b.ActionMask[firstTokenOf(b, 1)] = true
	wantErr(t, GAE(b, &AdvantageConfig{Gamma: 1, Lambda: 1}), "at least 2 masked tokens, the batch has 1")
}

func firstTokenOf(b *Batch, i int) int { s, _ := b.Seq(i); return s }

func TestOneTokenSequencesAndZeroStd(t *testing.T) {
	// Three one-token responses with equal rewards in one group, one alone.
	b := &Batch{
		Offsets: []int{0, 2, 4, 6, 8}, PromptLen: []int{1, 1, 1, 1}, Group: []int{1, 1, 1, 2},
		ActionMask: []bool{false, true, false, true, false, true, false, true},
	}
	b.AdvantageMask = b.ActionMask
	if err := AddOutcome(b, []float64{0.5, 0.5, 0.5, 2}); err != nil {
		t.Fatal(err)
	}
	if err := b.RewardsFromScores(); err != nil {
		t.Fatal(err)
	}
	if err := GRPO(b, &AdvantageConfig{NormAdvByStd: true}); err != nil {
		t.Fatal(err)
	}
	want := []float64{0, 0, 0, 0, 0, 0, 0, 2 / float64(float32(1+1e-6))}
	for tk := range want {
		if b.Advantages[tk] != want[tk] {
			t.Errorf("GRPO advantage[%d] = %v, want %v", tk, b.Advantages[tk], want[tk])
		}
	}
	if err := RLOO(b, nil); err != nil {
		t.Fatal(err)
	}
	if b.Advantages[7] != 2 || b.Advantages[1] != 0 {
		t.Errorf("RLOO advantages %v", b.Advantages)
	}
}

func TestLayoutErrors(t *testing.T) {
	cases := []struct {
		b    Batch
		want string
	}{
		{Batch{}, "Offsets is empty"},
		{Batch{Offsets: []int{1, 2}}, "Offsets[0] = 1"},
		{Batch{Offsets: []int{0, 3, 2}}, "Offsets[2] = 2 is less than"},
		{Batch{Offsets: []int{0, 2}, PromptLen: []int{3}}, "PromptLen[0] = 3"},
		{Batch{Offsets: []int{0, 2}, Tokens: []int32{1}}, "Tokens has 1 entries, want 2"},
		{Batch{Offsets: []int{0, 2}, ActionMask: []bool{true}}, "ActionMask has 1 entries, want 2"},
		{Batch{Offsets: []int{0, 2}, ActionMask: []bool{true, true}, LogProb: []float64{0}}, "LogProb has 1 entries"},
		{Batch{Offsets: []int{0, 2}, ActionMask: []bool{true, true}}, "LogProb is nil"},
	}
	for _, c := range cases {
		wantErr(t, c.b.Validate(FieldActionMask, FieldLogProb), c.want)
	}
}

func TestConfigErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	b := randomBatch(rng, 4)
	cfg := DefaultLossConfig()
	cfg.ClipRatioC = 1
	_, err := actorLoss(cfg)(b)
	wantErr(t, err, "dual-clip ratio c = 1")
	cfg = DefaultLossConfig()
	cfg.PolicyLoss = "nope"
	_, err = actorLoss(cfg)(b)
	wantErr(t, err, `unknown loss "nope"`, "vanilla")
	cfg = DefaultLossConfig()
	cfg.UseKLLoss, cfg.KLLossType = true, "k4"
	_, err = actorLoss(cfg)(b)
	wantErr(t, err, `unknown KL estimator "k4"`)
	_, err = ParseAggMode("token-sum")
	wantErr(t, err, `unknown loss aggregation mode "token-sum"`)
	wantErr(t, Estimate(b, &AdvantageConfig{Estimator: "ppo"}), `unknown advantage estimator "ppo"`, "gae")
	wantErr(t, Estimate(b, &AdvantageConfig{Estimator: "gae", Gamma: 1.5, Lambda: 1}), "gamma 1.5")
	wantErr(t, ReMax(b, nil), "BaselineScore is nil")
	var stale Output
	stale.Reset(3)
	w := make(Weights, b.NumSeqs())
	for _, name := range []string{"vanilla", "gspo", "twin-vanilla"} {
		l, _ := LookupLoss(name)
		wantErr(t, l(b, &cfg, w, &stale), "Output was Reset for 3 tokens")
	}
	wantErr(t, ValueLoss(b, testCliprange, w, &stale), "Output was Reset for 3 tokens")
}

func TestRegistryDuplicatePanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "twice for vanilla") {
			t.Errorf("duplicate registration: recover() = %v", r)
		}
	}()
	RegisterLoss("vanilla", PPOLoss)
}

func TestRewardPlacementErrors(t *testing.T) {
	b := &Batch{Offsets: []int{0, 3}, ActionMask: []bool{false, false, false}, Tokens: []int32{1, 7, 2}}
	wantErr(t, AddOutcome(b, []float64{1}), "sequence 0 has no action token")
	if err := AddOutcome(b, []float64{0}); err != nil {
		t.Errorf("zero outcome on a sequence without action tokens: %v", err)
	}
	b.ActionMask[1] = true
	wantErr(t, AddProcessRewards(b, 7, [][]float64{{0.1, 0.2}}, false), "2 process rewards but only 1 tool calls")
	wantErr(t, AddOutcome(b, []float64{math.NaN()}), "outcome score of sequence 0 is NaN")
	if err := AddProcessRewards(b, 7, [][]float64{{0.1}}, false); err != nil {
		t.Fatal(err)
	}
	if b.Scores[1] != 0.1 {
		t.Errorf("process reward placed at %v", b.Scores)
	}
}

func FuzzParseKL(f *testing.F) {
	for _, s := range []string{"kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "k3+", "abs+", "", "+", "full"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKL(s)
		if err != nil {
			return
		}
		v, d := k.Eval(-1.25, -0.5)
		if math.IsNaN(v) || math.IsNaN(d) {
			t.Errorf("%q: Eval gives %v, %v", s, v, d)
		}
	})
}

// FuzzValidate feeds arbitrary layouts to Validate and the estimators: they
// must return errors, never panic.
func FuzzValidate(f *testing.F) {
	f.Add([]byte{0, 2, 5}, []byte{0, 1, 1, 0, 1}, 1.0)
	f.Add([]byte{0, 3, 2}, []byte{1}, math.NaN())
	f.Fuzz(func(t *testing.T, offs, mask []byte, r float64) {
		b := &Batch{}
		for _, o := range offs {
			b.Offsets = append(b.Offsets, int(o))
		}
		for _, m := range mask {
			b.ActionMask = append(b.ActionMask, m%2 == 1)
		}
		b.AdvantageMask = b.ActionMask
		b.Rewards = make([]float64, len(mask))
		b.OldValues = make([]float64, len(mask))
		if len(b.Rewards) > 0 {
			b.Rewards[len(b.Rewards)-1] = r
		}
		b.Group = make([]int, max(len(offs)-1, 0))
		for _, name := range EstimatorNames() {
			_ = Estimate(b, &AdvantageConfig{Estimator: name, Gamma: 1, Lambda: 1})
		}
		if err := b.Validate(FieldActionMask, FieldRewards); err == nil {
			if _, err := NewNorm(TokenMean, b, 0); err == nil && len(offs) > 1 {
				b.Slice(0, b.NumSeqs())
			}
		}
	})
}

func TestHelpers(t *testing.T) {
	// Widen and Narrow: float32 in, float64 inside, float32 out, storage reused.
	src := []float32{1.5, -2.25, 3e-8}
	w := Widen(make([]float64, 0, 8), src)
	if len(w) != 3 || cap(w) != 8 || w[0] != 1.5 || w[1] != -2.25 || w[2] != float64(float32(3e-8)) {
		t.Errorf("Widen = %v (cap %d)", w, cap(w))
	}
	n := Narrow(nil, []float64{0.1, -4})
	if len(n) != 2 || n[0] != float32(0.1) || n[1] != -4 {
		t.Errorf("Narrow = %v", n)
	}
	// ResponseMask needs PromptLen and marks every token after the prompt.
	b := &Batch{Offsets: []int{0, 3, 5}}
	_, err := b.ResponseMask()
	wantErr(t, err, "ResponseMask needs PromptLen")
	b.PromptLen = []int{1, 2}
	m, err := b.ResponseMask()
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{false, true, true, false, false}
	for i := range want {
		if m[i] != want[i] {
			t.Fatalf("ResponseMask = %v, want %v", m, want)
		}
	}
	// MeanMetrics averages each name over the maps that have it.
	mm := MeanMetrics([]Metrics{{"a": 1, "b": 4}, {"a": 3}})
	if mm["a"] != 2 || mm["b"] != 4 || len(mm.Names()) != 2 || mm.Names()[0] != "a" {
		t.Errorf("MeanMetrics = %v", mm)
	}
	// MaskedStats over an empty mask is all zero.
	if mean, max, min, k := MaskedStats([]float64{1, 2}, []bool{false, false}); mean != 0 || max != 0 || min != 0 || k != 0 {
		t.Errorf("MaskedStats over nothing = %v %v %v %v", mean, max, min, k)
	}
	if mean, max, min, k := MaskedStats([]float64{1, 5, -2}, []bool{true, false, true}); mean != -0.5 || max != 1 || min != -2 || k != 2 {
		t.Errorf("MaskedStats = %v %v %v %v", mean, max, min, k)
	}
	ps := Metrics{}
	ps.PutStats("x", []float64{3, -1, 7}, []bool{true, true, false})
	if ps["x/mean"] != 1 || ps["x/max"] != 3 || ps["x/min"] != -1 {
		t.Errorf("PutStats = %v", ps)
	}
	// The registries list the built-ins.
	if got := EstimatorNames(); len(got) < 6 || got[0] != "gae" {
		t.Errorf("EstimatorNames = %v", got)
	}
	for _, name := range []string{"vanilla", "gspo"} {
		if _, err := LookupLoss(name); err != nil {
			t.Error(err)
		}
	}
	// The critic's value loss is no policy loss: actor.policy_loss=value fails.
	if _, err := LookupLoss("value"); err == nil {
		t.Error(`LookupLoss("value") found the critic's loss in the policy-loss registry`)
	}
}
