package rl

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// fdStep is the central-difference step in float64.
const fdStep = 1e-6

// TestFiniteDifferences checks every hand-written gradient against a float64
// central difference of the same loss.
func TestFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b := randomBatch(rng, 16)
	for tk := 0; tk < len(b.LogProb); tk += 5 {
		b.LogProb[tk] += []float64{1.4, -1.3, 0.8}[tk%3] // clip, dual clip
	}
	base := DefaultLossConfig()
	base.ClipRatioHigh = 0.28

	for _, mode := range []AggMode{TokenMean, SeqMeanTokenSum, SeqMeanTokenMean, SeqMeanTokenSumNorm} {
		cfg := base
		cfg.AggMode = mode
		f := actorLoss(cfg)
		out, err := f(b)
		if err != nil {
			t.Fatal(err)
		}
		if out.Metrics["actor/pg_clipfrac"] == 0 || out.Metrics["actor/pg_clipfrac_lower"] == 0 {
			t.Fatalf("%s: the batch must exercise both clips (metrics %v)", mode, out.Metrics)
		}
		checkGrad(t, string(mode)+" vanilla dlogprob vs finite difference", out.DLogProb, finiteDiff(t, b, b.LogProb, f, fdStep))

		v, err := valueLoss(cfg)(b)
		if err != nil {
			t.Fatal(err)
		}
		if v.Metrics["critic/vf_clipfrac"] == 0 {
			t.Fatalf("%s: the value clip is never active", mode)
		}
		checkGrad(t, string(mode)+" value dvalue vs finite difference", v.DValue, finiteDiff(t, b, b.Values, valueLoss(cfg), fdStep))
	}

	cfg := base
	cfg.EntropyCoeff = 0.05
	f := actorLoss(cfg)
	out, err := f(b)
	if err != nil {
		t.Fatal(err)
	}
	checkGrad(t, "entropy dentropy vs finite difference", out.DEntropy, finiteDiff(t, b, b.Entropy, f, fdStep))

	for _, k := range []string{"kl", "abs", "mse", "low_var_kl"} {
		cfg := base
		cfg.UseKLLoss, cfg.KLLossType, cfg.KLLossCoef = true, k, 0.5
		f := actorLoss(cfg)
		out, err := f(b)
		if err != nil {
			t.Fatal(err)
		}
		checkGrad(t, "actor with KL "+k+" dlogprob vs finite difference", out.DLogProb, finiteDiff(t, b, b.LogProb, f, fdStep))
	}

	g := gspoBatch(t, rng)
	for _, mode := range []AggMode{SeqMeanTokenMean, TokenMean, SeqMeanTokenSum} {
		cfg := base
		cfg.PolicyLoss, cfg.AggMode, cfg.ClipRatioLow, cfg.ClipRatioHigh = "gspo", mode, 3e-4, 4e-4
		f := actorLoss(cfg)
		out, err := f(g)
		if err != nil {
			t.Fatal(err)
		}
		checkGrad(t, string(mode)+" GSPO dlogprob vs finite difference", out.DLogProb, finiteDiff(t, g, g.LogProb, f, 1e-8))
	}
}

// TestStraightThroughKL checks that the "+" estimators keep the base value
// and take k2's gradient, p − q.
func TestStraightThroughKL(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for range 100 {
		p, q := -3*rng.Float64(), -3*rng.Float64()
		for _, base := range []KLEstimator{KLK1, KLAbs, KLK2, KLK3} {
			v0, _ := KLType{Estimator: base}.Eval(p, q)
			v1, d1 := KLType{Estimator: base, StraightThrough: true}.Eval(p, q)
			if v0 != v1 || d1 != p-q {
				t.Fatalf("estimator %d+: value %v (base %v), d/dp %v, want %v", base, v1, v0, d1, p-q)
			}
		}
	}
}

// TestMicroBatchesSumToMiniBatch splits a mini-batch into micro-batches and
// checks that, with the mini-batch's Norm, losses and gradients add up.
func TestMicroBatchesSumToMiniBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	b := randomBatch(rng, 20)
	// a micro-batch made only of a sequence without action tokens
	for tk := b.Offsets[7]; tk < b.Offsets[8]; tk++ {
		b.ActionMask[tk] = false
	}
	for _, mode := range []AggMode{TokenMean, SeqMeanTokenSum, SeqMeanTokenMean, SeqMeanTokenSumNorm} {
		cfg := DefaultLossConfig()
		cfg.AggMode, cfg.EntropyCoeff, cfg.UseKLLoss = mode, 0.01, true
		norm, err := NewNorm(mode, b, 0)
		if err != nil {
			t.Fatal(err)
		}
		var whole, critic Output
		if err := ActorLoss(b, &cfg, norm, &whole); err != nil {
			t.Fatal(err)
		}
		if err := CriticLoss(b, testCliprange, norm, &critic); err != nil {
			t.Fatal(err)
		}
		var sum, csum float64
		var dlp, dent, dv []float64
		for _, cut := range [][2]int{{0, 7}, {7, 8}, {8, 13}, {13, 20}} {
			micro := b.Slice(cut[0], cut[1])
			var out, cout Output
			if err := ActorLoss(micro, &cfg, norm, &out); err != nil {
				t.Fatal(err)
			}
			if err := CriticLoss(micro, testCliprange, norm, &cout); err != nil {
				t.Fatal(err)
			}
			sum += out.Loss
			csum += cout.Loss
			dlp = append(dlp, out.DLogProb...)
			dent = append(dent, out.DEntropy...)
			dv = append(dv, cout.DValue...)
		}
		if !near(sum, whole.Loss) || !near(csum, critic.Loss) {
			t.Errorf("%s: micro-batch losses sum to %v and %v, the mini-batch's are %v and %v", mode, sum, csum, whole.Loss, critic.Loss)
		}
		checkGrad(t, string(mode)+" micro-batch dlogprob", dlp, whole.DLogProb)
		checkGrad(t, string(mode)+" micro-batch dentropy", dent, whole.DEntropy)
		checkGrad(t, string(mode)+" micro-batch dvalue", dv, critic.DValue)
	}
}

// TestParallelChunksDeterministic runs a batch large enough to be split into
// several parallel chunks: the result must not depend on the thread count
// and must match the chunks computed one by one as micro-batches.
func TestParallelChunksDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	big := randomBatch(rng, 6000)
	if len(seqChunks(big)) < 2 {
		t.Fatalf("batch of %d tokens gives %d chunk(s)", big.NumTokens(), len(seqChunks(big)))
	}
	cfg := DefaultLossConfig()
	cfg.UseKLLoss, cfg.EntropyCoeff = true, 0.01
	first, err := actorLoss(cfg)(big)
	if err != nil {
		t.Fatal(err)
	}
	prev := runtime.GOMAXPROCS(1)
	serial, err := actorLoss(cfg)(big)
	runtime.GOMAXPROCS(prev)
	if err != nil {
		t.Fatal(err)
	}
	if serial.Loss != first.Loss {
		t.Errorf("loss %v on one thread, %v on %d: not bit-identical", serial.Loss, first.Loss, prev)
	}
	norm, _ := NewNorm(cfg.AggMode, big, 0)
	var sum float64
	for _, c := range seqChunks(big) {
		var out Output
		if err := ActorLoss(big.Slice(c[0], c[1]), &cfg, norm, &out); err != nil {
			t.Fatal(err)
		}
		sum += out.Loss
	}
	if !near(sum, first.Loss) {
		t.Errorf("parallel loss %v, chunk by chunk %v", first.Loss, sum)
	}
}
