package rl

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The gorgonia twins of the hand-written losses: the same per-token formulas
// written as expression graphs, differentiated by gorgonia. They go through
// AutodiffLoss, so these tests check the adapter and the hand-written
// gradients at once. gorgonia's MinBetween/MaxBetween send the whole gradient
// to their first operand on a tie, which reproduces "the unclipped branch is
// active inside the clip range".
func init() {
	RegisterLoss("twin-vanilla", AutodiffLoss(ppoTwin))
	RegisterLoss("twin-value", AutodiffLoss(valueTwin))
	RegisterLoss("twin-actor", AutodiffLoss(actorTwin))
	for _, k := range []string{"kl", "abs", "mse", "low_var_kl"} {
		RegisterLoss("twin-kl-"+k, AutodiffLoss(func(v *Vars) (*G.Node, error) { return klTwin(v, k), nil }))
	}
}

func clampNode(v *Vars, x *G.Node, lo, hi float64) *G.Node {
	return G.Must(G.MinBetween(G.Must(G.MaxBetween(x, v.Full(lo))), v.Full(hi)))
}

func ppoTwin(v *Vars) (*G.Node, error) {
	cfg := v.Config
	d := clampNode(v, G.Must(G.Sub(v.LogProb, v.OldLogProb)), -logRatioClamp, logRatioClamp)
	ratio := G.Must(G.Exp(d))
	negA := G.Must(G.Neg(v.Advantages))
	l1 := G.Must(G.HadamardProd(negA, ratio))
	l2 := G.Must(G.HadamardProd(negA, clampNode(v, ratio, 1-cfg.clipLow(), 1+cfg.clipHigh())))
	lc := G.Must(G.MaxBetween(l1, l2))
	l3 := G.Must(G.HadamardProd(negA, v.Full(cfg.ClipRatioC)))
	dual := G.Must(G.MinBetween(lc, l3))
	neg := G.Must(G.Lt(v.Advantages, v.Full(0), true))
	pos := G.Must(G.Sub(v.Full(1), neg))
	v.Metric("actor/pg_clipfrac", G.Must(G.Gt(l2, l1, true)))
	return G.Add(G.Must(G.HadamardProd(neg, dual)), G.Must(G.HadamardProd(pos, lc)))
}

func valueTwin(v *Vars) (*G.Node, error) {
	eps := testCliprange
	lo := G.Must(G.Sub(v.OldValues, v.Full(eps)))
	hi := G.Must(G.Add(v.OldValues, v.Full(eps)))
	vc := G.Must(G.MinBetween(G.Must(G.MaxBetween(v.Values, lo)), hi))
	l1 := G.Must(G.Square(G.Must(G.Sub(v.Values, v.Returns))))
	l2 := G.Must(G.Square(G.Must(G.Sub(vc, v.Returns))))
	return G.HadamardProd(v.Full(0.5), G.Must(G.MaxBetween(l1, l2)))
}

func klTwin(v *Vars, kind string) *G.Node {
	d := G.Must(G.Sub(v.LogProb, v.RefLogProb))
	switch kind {
	case "kl":
		return d
	case "abs":
		return G.Must(G.Abs(d))
	case "mse":
		return G.Must(G.HadamardProd(v.Full(0.5), G.Must(G.Square(d))))
	}
	x := clampNode(v, G.Must(G.Neg(d)), -k3InnerClamp, k3InnerClamp)
	k := G.Must(G.Sub(G.Must(G.Sub(G.Must(G.Exp(x)), x)), v.Full(1)))
	return clampNode(v, k, -k3OuterClamp, k3OuterClamp)
}

// actorTwin is PPO − c_H·H + c_KL·k3 in one graph, with the coefficients of
// the test below.
func actorTwin(v *Vars) (*G.Node, error) {
	pg, err := ppoTwin(v)
	if err != nil {
		return nil, err
	}
	ent := G.Must(G.HadamardProd(v.Full(-0.01), v.Entropy))
	kl := G.Must(G.HadamardProd(v.Full(0.1), klTwin(v, "low_var_kl")))
	return G.Add(G.Must(G.Add(pg, ent)), kl)
}

func TestAutodiffTwins(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	b := randomBatch(rng, 24)
	// Push some tokens past the clip, the dual clip and the ±20 clamp.
	for t := 0; t < len(b.LogProb); t += 7 {
		b.LogProb[t] += []float64{1.5, -1.5, 25, -0.6}[t%4]
	}
	for _, mode := range []AggMode{TokenMean, SeqMeanTokenSum, SeqMeanTokenMean, SeqMeanTokenSumNorm} {
		cfg := DefaultLossConfig()
		cfg.AggMode, cfg.ClipRatioHigh = mode, 0.28
		hand, err := namedLoss("vanilla", cfg)(b)
		if err != nil {
			t.Fatal(err)
		}
		twin, err := namedLoss("twin-vanilla", cfg)(b)
		if err != nil {
			t.Fatal(err)
		}
		if !near(hand.Loss, twin.Loss) {
			t.Errorf("%s: vanilla loss %v, twin %v", mode, hand.Loss, twin.Loss)
		}
		if !near(hand.Metrics["actor/pg_clipfrac"], twin.Metrics["actor/pg_clipfrac"]) || hand.Metrics["actor/pg_clipfrac"] == 0 {
			t.Errorf("%s: clipfrac %v, twin %v", mode, hand.Metrics["actor/pg_clipfrac"], twin.Metrics["actor/pg_clipfrac"])
		}
		checkGrad(t, string(mode)+" vanilla dlogprob vs gorgonia", hand.DLogProb, twin.DLogProb)

		hv, err := valueLoss(cfg)(b)
		if err != nil {
			t.Fatal(err)
		}
		tv, err := namedLoss("twin-value", cfg)(b)
		if err != nil {
			t.Fatal(err)
		}
		if !near(hv.Loss, tv.Loss) {
			t.Errorf("%s: value loss %v, twin %v", mode, hv.Loss, tv.Loss)
		}
		checkGrad(t, string(mode)+" value dvalue vs gorgonia", hv.DValue, tv.DValue)
	}

	for _, k := range []string{"kl", "abs", "mse", "low_var_kl"} {
		cfg := DefaultLossConfig()
		cfg.UseKLLoss, cfg.KLLossType, cfg.KLLossCoef = true, k, 1
		withKL, err := actorLoss(cfg)(b)
		if err != nil {
			t.Fatal(err)
		}
		cfg.UseKLLoss = false
		without, err := actorLoss(cfg)(b)
		if err != nil {
			t.Fatal(err)
		}
		twin, err := namedLoss("twin-kl-"+k, cfg)(b)
		if err != nil {
			t.Fatal(err)
		}
		if !near(withKL.Loss-without.Loss, twin.Loss) || !near(withKL.Metrics["actor/kl_loss"], twin.Loss) {
			t.Errorf("KL %s: term %v (metric %v), twin %v", k, withKL.Loss-without.Loss, withKL.Metrics["actor/kl_loss"], twin.Loss)
		}
		diff := make([]float64, len(withKL.DLogProb))
		for i := range diff {
			diff[i] = withKL.DLogProb[i] - without.DLogProb[i]
		}
		checkGrad(t, "KL "+k+" dlogprob vs gorgonia", diff, twin.DLogProb)
	}

	cfg := DefaultLossConfig()
	cfg.ClipRatioHigh, cfg.EntropyCoeff = 0.28, 0.01
	cfg.UseKLLoss, cfg.KLLossType, cfg.KLLossCoef = true, "low_var_kl", 0.1
	hand, err := actorLoss(cfg)(b)
	if err != nil {
		t.Fatal(err)
	}
	cfg.EntropyCoeff, cfg.UseKLLoss, cfg.PolicyLoss = 0, false, "twin-actor"
	twin, err := actorLoss(cfg)(b)
	if err != nil {
		t.Fatal(err)
	}
	if !near(hand.Loss, twin.Loss) {
		t.Errorf("actor loss %v, twin %v", hand.Loss, twin.Loss)
	}
	checkGrad(t, "actor dlogprob vs gorgonia", hand.DLogProb, twin.DLogProb)
	checkGrad(t, "actor dentropy vs gorgonia", hand.DEntropy, twin.DEntropy)
}

// TestGSPOTwin checks the GSPO gradient against gorgonia differentiating
// the sequence-level objective itself (no straight-through), with
// per-sequence advantages from GRPO, for which the two agree.
func TestGSPOTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	b := gspoBatch(t, rng)
	for _, mode := range []AggMode{SeqMeanTokenMean, TokenMean} {
		cfg := DefaultLossConfig()
		cfg.AggMode, cfg.ClipRatioLow, cfg.ClipRatioHigh = mode, 3e-4, 4e-4
		hand, err := namedLoss("gspo", cfg)(b)
		if err != nil {
			t.Fatal(err)
		}
		if c := hand.Metrics["actor/pg_clipfrac"]; c == 0 || c == 1 {
			t.Fatalf("clip fraction %v: the batch must mix clipped and unclipped sequences", c)
		}
		loss, grad := gspoGorgonia(t, b, &cfg)
		if !near(hand.Loss, loss) {
			t.Errorf("%s: GSPO loss %v, gorgonia %v", mode, hand.Loss, loss)
		}
		checkGrad(t, string(mode)+" GSPO dlogprob vs gorgonia", hand.DLogProb, grad)
	}
}

// gspoBatch is a random batch with GRPO advantages and log-probs within a
// few 1e-4 of the old ones, so GSPO's small clip range is sometimes active.
func gspoBatch(t *testing.T, rng *rand.Rand) *Batch {
	b := randomBatch(rng, 24)
	for i := range b.LogProb {
		b.LogProb[i] = b.OldLogProb[i] + 6e-4*rng.NormFloat64()
	}
	if err := GRPO(b, &AdvantageConfig{NormAdvByStd: true}); err != nil {
		t.Fatal(err)
	}
	return b
}

// gspoGorgonia builds GSPO's sequence-level objective with a dense
// membership matrix and returns the loss and d loss/d LogProb.
func gspoGorgonia(t *testing.T, b *Batch, cfg *LossConfig) (float64, []float64) {
	t.Helper()
	S, N := b.NumSeqs(), b.NumTokens()
	norm, err := NewNorm(cfg.AggMode, b, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := norm.SeqWeights(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	member := make([]float64, S*N) // [S, N], 1 where token t is an action token of sequence i
	count := make([]float64, S)
	weight := make([]float64, N)
	adv := make([]float64, N)
	for i := 0; i < S; i++ {
		s, e := b.Seq(i)
		for tk := s; tk < e; tk++ {
			if b.ActionMask[tk] {
				member[i*N+tk] = 1
				count[i]++
				weight[tk] = w[i]
				adv[tk] = b.Advantages[tk]
			}
		}
		count[i] = max(count[i], 1)
	}
	g := G.NewGraph()
	vec := func(n int, x []float64, name string) *G.Node {
		return G.NewVector(g, tensor.Float64, G.WithShape(n), G.WithName(name), G.WithValue(tensor.New(tensor.WithShape(n), tensor.WithBacking(x))))
	}
	full := func(n int, x float64) *G.Node {
		d := make([]float64, n)
		for i := range d {
			d[i] = x
		}
		return g.Constant(tensor.New(tensor.WithShape(n), tensor.WithBacking(d)))
	}
	logp := vec(N, append([]float64(nil), b.LogProb...), "logp")
	old := vec(N, b.OldLogProb, "old")
	M := G.NewMatrix(g, tensor.Float64, G.WithShape(S, N), G.WithName("M"), G.WithValue(tensor.New(tensor.WithShape(S, N), tensor.WithBacking(member))))
	seqMean := G.Must(G.HadamardDiv(G.Must(G.Mul(M, G.Must(G.Sub(logp, old)))), vec(S, count, "count")))
	seqMean = G.Must(G.MinBetween(seqMean, full(S, gspoLogRatioMax)))
	tokRatio := G.Must(G.Mul(G.Must(G.Transpose(M)), G.Must(G.Exp(seqMean))))
	negA := G.Must(G.Neg(vec(N, adv, "adv")))
	l1 := G.Must(G.HadamardProd(negA, tokRatio))
	clipped := G.Must(G.MinBetween(G.Must(G.MaxBetween(tokRatio, full(N, 1-cfg.clipLow()))), full(N, 1+cfg.clipHigh())))
	l2 := G.Must(G.HadamardProd(negA, clipped))
	cost := G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.MaxBetween(l1, l2)), vec(N, weight, "w")))))
	grads, err := G.Grad(cost, logp)
	if err != nil {
		t.Fatal(err)
	}
	var costVal, gradVal G.Value
	G.Read(cost, &costVal)
	G.Read(grads[0], &gradVal)
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	return costVal.Data().(float64), append([]float64(nil), gradVal.Data().([]float64)...)
}

func TestAutodiffMaskedNaNDoesNotLeak(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	b := randomBatch(rng, 6)
	cfg := DefaultLossConfig()
	ref, err := namedLoss("twin-vanilla", cfg)(b)
	if err != nil {
		t.Fatal(err)
	}
	masked := -1
	for i, m := range b.ActionMask {
		if !m {
			masked = i
			break
		}
	}
	b.LogProb[masked] = nanValue()
	out, err := namedLoss("twin-vanilla", cfg)(b)
	if err != nil {
		t.Fatalf("NaN on a masked-out token: %v", err)
	}
	if out.Loss != ref.Loss {
		t.Errorf("loss %v with a masked-out NaN, %v without", out.Loss, ref.Loss)
	}
	for i, m := range b.ActionMask {
		if m {
			b.LogProb[i] = nanValue()
			_, err := namedLoss("twin-vanilla", cfg)(b)
			wantErr(t, err, "LogProb[", "is NaN")
			return
		}
	}
}

func TestAutodiffGraphCached(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	calls := 0
	l := AutodiffLoss(func(v *Vars) (*G.Node, error) {
		calls++
		return ppoTwin(v)
	})
	cfg := DefaultLossConfig()
	for range 3 {
		b := randomBatch(rng, 5) // different token counts, one bucket
		w, _ := mustNorm(t, b).SeqWeights(b, nil)
		var out Output
		out.Reset(b.NumTokens())
		if err := l(b, &cfg, w, &out); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Errorf("graph built %d times for one bucket, want 1", calls)
	}
}

func mustNorm(t *testing.T, b *Batch) Norm {
	t.Helper()
	n, err := NewNorm(TokenMean, b, 0)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
