package rl

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestPPOVectorMatchesScalar runs the plain PPO loss through the AVX2 loop
// and the scalar loop on long sequences that hit every branch: both clips,
// the ±20 clamp, masked-out NaN.
func TestPPOVectorMatchesScalar(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2/FMA on this machine")
	}
	rng := rand.New(rand.NewPCG(51, 52))
	b := randomBatch(rng, 1)
	for len(b.ActionMask) < 20000 {
		b = appendBatch(b, randomBatch(rng, 64))
	}
	b.Entropy, b.Tokens = nil, nil
	for tk := range b.LogProb {
		switch tk % 11 {
		case 1:
			b.LogProb[tk] += 1.5
		case 4:
			b.LogProb[tk] -= 1.5
		case 7:
			b.LogProb[tk] += 30
		}
		if !b.ActionMask[tk] && tk%5 == 0 {
			b.LogProb[tk] = math.NaN()
		}
	}
	for _, mode := range []AggMode{TokenMean, SeqMeanTokenMean} {
		cfg := DefaultLossConfig()
		cfg.AggMode, cfg.ClipRatioHigh = mode, 0.28
		useAVX2 = false
		scalar, err := actorLoss(cfg)(b)
		useAVX2 = true
		if err != nil {
			t.Fatal(err)
		}
		wide := useAVX512
		for _, avx512 := range []bool{false, wide} {
			useAVX512 = avx512
			vec, err := actorLoss(cfg)(b)
			useAVX512 = wide
			if err != nil {
				t.Fatal(err)
			}
			compareLoss(t, fmt.Sprintf("%s (AVX-512 %v)", mode, avx512), vec, scalar)
		}
	}

	// The fused entropy and k3 KL loop against the scalar loop.
	ent := make([]float64, len(b.LogProb))
	for tk := range ent {
		ent[tk] = float64(tk%7) * 0.3
		if tk%13 == 0 {
			b.RefLogProb[tk] -= 25 // k3's clamps
		}
	}
	b.Entropy = ent
	wide := useAVX512
	for _, c := range []struct {
		kl     string
		avx512 bool
	}{{"", false}, {"low_var_kl", false}, {"k3+", false}, {"", wide}, {"low_var_kl", wide}, {"k3+", wide}} {
		kl := c.kl
		cfg := DefaultLossConfig()
		cfg.EntropyCoeff, cfg.KLLossCoef, cfg.AggMode = 0.01, 0.2, SeqMeanTokenSum
		cfg.UseKLLoss, cfg.KLLossType = kl != "", kl
		useAVX512 = c.avx512
		vec, err := actorLoss(cfg)(b)
		useAVX512 = wide
		if err != nil {
			t.Fatal(err)
		}
		useAVX2 = false
		scalar, err := actorLoss(cfg)(b)
		useAVX2 = true
		if err != nil {
			t.Fatal(err)
		}
		if !near(vec.Loss, scalar.Loss) {
			t.Errorf("KL %q: loss %v (AVX2) vs %v (scalar)", kl, vec.Loss, scalar.Loss)
		}
		for _, name := range []string{"actor/pg_loss", "actor/pg_clipfrac", "actor/pg_clipfrac_lower", "actor/ppo_kl", "actor/entropy", "actor/kl_loss"} {
			if !near(vec.Metrics[name], scalar.Metrics[name]) {
				t.Errorf("KL %q: %s %v (AVX2) vs %v (scalar)", kl, name, vec.Metrics[name], scalar.Metrics[name])
			}
		}
		checkGrad(t, "KL "+kl+" AVX2 dlogprob", vec.DLogProb, scalar.DLogProb)
		checkGrad(t, "KL "+kl+" AVX2 dentropy", vec.DEntropy, scalar.DEntropy)
	}
	cfg := DefaultLossConfig()
	cfg.UseKLLoss, cfg.EntropyCoeff = true, 0.01
	for _, f := range []struct {
		x    []float64
		name string
	}{{b.Entropy, "Entropy"}, {b.RefLogProb, "RefLogProb"}, {b.Advantages, "Advantages"}} {
		tk := firstAction(b, 30, 1)
		v := f.x[tk]
		f.x[tk] = math.NaN()
		_, err := actorLoss(cfg)(b)
		f.x[tk] = v
		wantErr(t, err, f.name+"[", "(sequence 30, token")
	}

	// A NaN on a model token is still reported, with its position.
	tk := firstAction(b, 40, 0)
	b.OldLogProb[tk] = math.Inf(1)
	_, err := actorLoss(DefaultLossConfig())(b)
	wantErr(t, err, "OldLogProb[", "(sequence 40, token")
}

// TestValueVectorMatchesScalar checks the AVX2 value loss against the
// scalar loop, with both clip outcomes and a NaN on a masked-out token.
func TestValueVectorMatchesScalar(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2/FMA on this machine")
	}
	rng := rand.New(rand.NewPCG(53, 54))
	b := randomBatch(rng, 1)
	for len(b.ActionMask) < 20000 {
		b = appendBatch(b, randomBatch(rng, 64))
	}
	b.Tokens = nil
	b.Values = make([]float64, len(b.ActionMask))
	b.OldValues = make([]float64, len(b.ActionMask))
	b.Returns = make([]float64, len(b.ActionMask))
	for tk := range b.Values {
		b.OldValues[tk] = rng.NormFloat64()
		b.Values[tk] = b.OldValues[tk] + 0.8*rng.NormFloat64()
		b.Returns[tk] = b.OldValues[tk] + rng.NormFloat64()
		if !b.ActionMask[tk] && tk%3 == 0 {
			b.Values[tk] = math.NaN()
		}
	}
	cfg := DefaultLossConfig()
	cfg.AggMode = SeqMeanTokenMean
	vec, err := valueLoss(cfg)(b)
	if err != nil {
		t.Fatal(err)
	}
	useAVX2 = false
	scalar, err := valueLoss(cfg)(b)
	useAVX2 = true
	if err != nil {
		t.Fatal(err)
	}
	if !near(vec.Loss, scalar.Loss) {
		t.Errorf("value loss %v (AVX2) vs %v (scalar)", vec.Loss, scalar.Loss)
	}
	for _, name := range []string{"critic/vf_loss", "critic/vf_clipfrac", "critic/vpred_mean"} {
		if !near(vec.Metrics[name], scalar.Metrics[name]) || scalar.Metrics[name] == 0 {
			t.Errorf("%s %v (AVX2) vs %v (scalar)", name, vec.Metrics[name], scalar.Metrics[name])
		}
	}
	checkGrad(t, "AVX2 dvalue", vec.DValue, scalar.DValue)
	tk := firstAction(b, 50, 0)
	b.Returns[tk] = math.Inf(-1)
	_, err = valueLoss(cfg)(b)
	wantErr(t, err, "Returns[", "(sequence 50, token")
}

// TestGSPOVectorMatchesScalar checks the AVX2 GSPO passes against the
// scalar loop, with clipped and unclipped sequences, a sequence whose
// log-ratio hits the clamp, and a NaN on a masked-out token.
func TestGSPOVectorMatchesScalar(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2/FMA on this machine")
	}
	rng := rand.New(rand.NewPCG(55, 56))
	b := randomBatch(rng, 1)
	for len(b.ActionMask) < 20000 {
		b = appendBatch(b, randomBatch(rng, 64))
	}
	b.Tokens, b.Entropy = nil, nil
	for tk := range b.LogProb {
		b.LogProb[tk] = b.OldLogProb[tk] + 5e-4*rng.NormFloat64()
		if !b.ActionMask[tk] && tk%4 == 0 {
			b.LogProb[tk] = math.NaN()
		}
	}
	s, e := b.Seq(10)
	for tk := s; tk < e; tk++ {
		b.LogProb[tk] = b.OldLogProb[tk] + 12 // log-ratio above GSPO's clamp of 10
	}
	cfg := DefaultLossConfig()
	cfg.PolicyLoss, cfg.AggMode, cfg.ClipRatioLow, cfg.ClipRatioHigh = "gspo", SeqMeanTokenMean, 3e-4, 4e-4
	useAVX2 = false
	scalar, err := actorLoss(cfg)(b)
	useAVX2 = true
	if err != nil {
		t.Fatal(err)
	}
	wide := useAVX512
	for _, avx512 := range []bool{false, wide} {
		useAVX512 = avx512
		vec, err := actorLoss(cfg)(b)
		useAVX512 = wide
		if err != nil {
			t.Fatal(err)
		}
		if !near(vec.Loss, scalar.Loss) {
			t.Errorf("AVX-512 %v: GSPO loss %v (vector) vs %v (scalar)", avx512, vec.Loss, scalar.Loss)
		}
		for _, name := range []string{"actor/pg_clipfrac", "actor/ppo_kl"} {
			if !near(vec.Metrics[name], scalar.Metrics[name]) || scalar.Metrics[name] == 0 {
				t.Errorf("AVX-512 %v: %s %v (vector) vs %v (scalar)", avx512, name, vec.Metrics[name], scalar.Metrics[name])
			}
		}
		checkGrad(t, fmt.Sprintf("GSPO (AVX-512 %v) dlogprob", avx512), vec.DLogProb, scalar.DLogProb)
	}
	tk := firstAction(b, 20, 0)
	b.Advantages[tk] = math.Inf(1)
	_, err = actorLoss(cfg)(b)
	wantErr(t, err, "Advantages[", "(sequence 20, token")
}

// compareLoss checks a vector-loop PPO result against the scalar loop's.
func compareLoss(t *testing.T, what string, vec, scalar *Output) {
	t.Helper()
	if !near(vec.Loss, scalar.Loss) {
		t.Errorf("%s: loss %v (vector) vs %v (scalar)", what, vec.Loss, scalar.Loss)
	}
	for _, name := range []string{"actor/pg_clipfrac", "actor/pg_clipfrac_lower", "actor/ppo_kl"} {
		if !near(vec.Metrics[name], scalar.Metrics[name]) || scalar.Metrics[name] == 0 {
			t.Errorf("%s: %s %v (vector) vs %v (scalar)", what, name, vec.Metrics[name], scalar.Metrics[name])
		}
	}
	checkGrad(t, what+" dlogprob", vec.DLogProb, scalar.DLogProb)
}
