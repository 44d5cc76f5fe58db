package rl

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randomBatch builds S sequences in groups of up to 4: a prompt, then model
// turns separated by environment runs, with random log-probs, values and
// entropies, an outcome on the last action token and advantages/returns from
// GAE. The log-probs stay well inside the ±20 clamp except where the test
// moves them.
func randomBatch(rng *rand.Rand, S int) *Batch {
	b := &Batch{Offsets: []int{0}}
	group := 0
	for i := 0; i < S; i++ {
		if i%4 == 0 {
			group++
		}
		b.Group = append(b.Group, group)
		p := 1 + rng.IntN(3)
		b.PromptLen = append(b.PromptLen, p)
		for range p {
			b.ActionMask = append(b.ActionMask, false)
		}
		turns := 1 + rng.IntN(3)
		for k := range turns {
			for range 1 + rng.IntN(5) {
				b.ActionMask = append(b.ActionMask, true)
			}
			if k < turns-1 {
				for range 1 + rng.IntN(3) {
					b.ActionMask = append(b.ActionMask, false)
				}
			}
		}
		b.Offsets = append(b.Offsets, len(b.ActionMask))
	}
	N := len(b.ActionMask)
	b.AdvantageMask = b.ActionMask
	b.Tokens = make([]int32, N)
	fill := func(f func() float64) []float64 {
		x := make([]float64, N)
		for t := range x {
			x[t] = f()
		}
		return x
	}
	b.OldLogProb = fill(func() float64 { return -math.Abs(rng.NormFloat64()) * 1.5 })
	b.RefLogProb = make([]float64, N)
	b.LogProb = make([]float64, N)
	for t := range N {
		b.RefLogProb[t] = b.OldLogProb[t] + 0.3*rng.NormFloat64()
		b.LogProb[t] = b.OldLogProb[t] + 0.3*rng.NormFloat64()
	}
	b.Entropy = fill(func() float64 { return 3 * rng.Float64() })
	b.Values = fill(rng.NormFloat64)
	b.OldValues = make([]float64, N)
	for t := range N {
		b.OldValues[t] = b.Values[t] + 0.6*rng.NormFloat64()
	}
	scores := make([]float64, S)
	for i := range scores {
		scores[i] = float64(rng.IntN(5))/2 - 1
	}
	if err := AddOutcome(b, scores); err != nil {
		panic(err)
	}
	if err := b.RewardsFromScores(); err != nil {
		panic(err)
	}
	if err := GAE(b, &AdvantageConfig{Gamma: 0.95, Lambda: 0.9}); err != nil {
		panic(err)
	}
	return b
}

// lossFunc evaluates a loss on b and returns its Output.
type lossFunc func(b *Batch) (*Output, error)

// actorLoss returns a lossFunc for ActorLoss with cfg, the Norm counted on
// the batch itself.
func actorLoss(cfg LossConfig) lossFunc {
	return func(b *Batch) (*Output, error) {
		norm, err := NewNorm(cfg.AggMode, b, cfg.LossScaleFactor)
		if err != nil {
			return nil, err
		}
		out := &Output{}
		return out, ActorLoss(b, &cfg, norm, out)
	}
}

// namedLoss returns a lossFunc that calls the registered loss name directly.
func namedLoss(name string, cfg LossConfig) lossFunc {
	return func(b *Batch) (*Output, error) {
		l, err := LookupLoss(name)
		if err != nil {
			return nil, err
		}
		norm, err := NewNorm(cfg.AggMode, b, cfg.LossScaleFactor)
		if err != nil {
			return nil, err
		}
		w, err := norm.SeqWeights(b, nil)
		if err != nil {
			return nil, err
		}
		out := &Output{}
		out.Reset(b.NumTokens())
		return out, l(b, &cfg, w, out)
	}
}

// testCliprange is the value clip of the critic tests (verl's default).
const testCliprange = 0.5

// valueLoss returns a lossFunc for ValueLoss with the value clip
// testCliprange and the aggregation of cfg.
func valueLoss(cfg LossConfig) lossFunc {
	return func(b *Batch) (*Output, error) {
		norm, err := NewNorm(cfg.AggMode, b, cfg.LossScaleFactor)
		if err != nil {
			return nil, err
		}
		w, err := norm.SeqWeights(b, nil)
		if err != nil {
			return nil, err
		}
		out := &Output{}
		out.Reset(b.NumTokens())
		return out, ValueLoss(b, testCliprange, w, out)
	}
}

// finiteDiff returns the central difference of the loss with respect to
// every entry of x (a field of b), step h.
func finiteDiff(t *testing.T, b *Batch, x []float64, f lossFunc, h float64) []float64 {
	t.Helper()
	g := make([]float64, len(x))
	for i := range x {
		x0 := x[i]
		x[i] = x0 + h
		up, err := f(b)
		if err != nil {
			t.Fatal(err)
		}
		x[i] = x0 - h
		down, err := f(b)
		if err != nil {
			t.Fatal(err)
		}
		x[i] = x0
		g[i] = (up.Loss - down.Loss) / (2 * h)
	}
	return g
}

// gradTol is the required relative agreement of float64 gradients.
const gradTol = 1e-6

// checkGrad compares got with want relative to want's largest entry.
func checkGrad(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
	scale := 0.0
	for _, v := range want {
		scale = math.Max(scale, math.Abs(v))
	}
	if scale == 0 {
		t.Fatalf("%s: reference gradient is all zero; the test would prove nothing", what)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > gradTol*scale {
			t.Errorf("%s[%d] = %.12g, want %.12g (scale %.3g)", what, i, got[i], want[i], scale)
			return
		}
	}
}
