package rl

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpBlockAccuracy compares expDiffBlock with math.Exp in ulps over the
// kernels' range and at the edges of the table reduction.
func TestExpBlockAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	src := []float64{0, -0.0, 1, -1, 20, -20, math.Ln2 / 128, -math.Ln2 / 128, 700, -700}
	for range 200000 {
		src = append(src, (2*rng.Float64()-1)*25, (2*rng.Float64()-1)*1e-3)
	}
	dst := make([]float64, len(src))
	zero := make([]float64, len(src))
	expDiffBlock(dst, src, zero, expLimit)
	worst := 0.0
	for i, x := range src {
		want := math.Exp(x)
		ulp := math.Nextafter(want, math.Inf(1)) - want
		if u := math.Abs(dst[i]-want) / ulp; u > worst {
			worst = u
			if u > 4 {
				t.Errorf("exp(%v) = %v, math.Exp %v: %.1f ulp", x, dst[i], want, u)
			}
		}
	}
	t.Logf("worst error %.1f ulp", worst)
	expDiffBlock(dst[:2], []float64{1000, -1000}, zero, expLimit)
	if math.Abs(dst[0]/math.Exp(expLimit)-1) > 1e-15 || math.Abs(dst[1]/math.Exp(-expLimit)-1) > 1e-15 {
		t.Errorf("out-of-range arguments give %v, %v", dst[0], dst[1])
	}
}

// TestFusedActorMatchesTerms checks the fused PPO + entropy + KL kernel
// against the policy loss and the separate entropy and KL terms.
func TestFusedActorMatchesTerms(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	b := randomBatch(rng, 30)
	for tk := 0; tk < len(b.LogProb); tk += 9 {
		b.LogProb[tk] += 2
		b.RefLogProb[tk] -= 25
	}
	for _, kl := range []string{"kl", "abs", "mse", "low_var_kl", "k1+", "abs+", "k2+", "k3+"} {
		cfg := DefaultLossConfig()
		cfg.EntropyCoeff, cfg.UseKLLoss, cfg.KLLossType, cfg.KLLossCoef, cfg.AggMode = 0.02, true, kl, 0.3, SeqMeanTokenMean
		fused, err := actorLoss(cfg)(b)
		if err != nil {
			t.Fatal(err)
		}
		norm, _ := NewNorm(cfg.AggMode, b, 0)
		w, _ := norm.SeqWeights(b, nil)
		var sep Output
		sep.Reset(b.NumTokens())
		kind, _ := ParseKL(kl)
		for _, step := range []func() error{
			func() error { return ppoFused(b, &cfg, w, &sep, actorTerms{}) },
			func() error { return entropyTerm(b, cfg.EntropyCoeff, w, &sep) },
			func() error { return klLossTerm(b, kind, cfg.KLLossCoef, w, &sep) },
		} {
			if err := step(); err != nil {
				t.Fatal(err)
			}
		}
		if !near(fused.Loss, sep.Loss) {
			t.Errorf("%s: fused loss %v, separate terms %v", kl, fused.Loss, sep.Loss)
		}
		for _, name := range []string{"actor/pg_loss", "actor/entropy", "actor/kl_loss", "actor/pg_clipfrac", "actor/ppo_kl"} {
			if !near(fused.Metrics[name], sep.Metrics[name]) {
				t.Errorf("%s: %s fused %v, separate %v", kl, name, fused.Metrics[name], sep.Metrics[name])
			}
		}
		checkGrad(t, kl+" fused dlogprob", fused.DLogProb, sep.DLogProb)
		checkGrad(t, kl+" fused dentropy", fused.DEntropy, sep.DEntropy)
	}
}
