package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// exp64Into gives math.Exp's bits in every lane: a sweep of float64 bit
// patterns over every binade, dense samples of the softmax range
// [−800, 800], the branch boundaries and the special values.
func TestExp64IntoBitForBit(t *testing.T) {
	var xs []float64
	for b := uint64(0); b < 1<<64-1<<52; b += 1<<52/16 + 12345 {
		xs = append(xs, math.Float64frombits(b))
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 2_000_000 {
		xs = append(xs, (r.Float64()*2-1)*800, -r.Float64()*40, r.NormFloat64()*1e-3)
	}
	for _, c := range []float64{-708, -708.39, -708.75, -709, -745.13, 709, 709.4, 709.78, 7.09782712893384e+02, 0} {
		x := c
		for range 40 {
			x = math.Nextafter(x, math.Inf(-1))
		}
		for range 80 {
			xs = append(xs, x)
			x = math.Nextafter(x, math.Inf(1))
		}
	}
	xs = append(xs, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), -1e300, 1e300, 5e-324)
	got := make([]float64, len(xs))
	for _, n := range []int{len(xs), 7, 8, 9, 17} {
		exp64Into(got[:n], xs[:n])
		for i, x := range xs[:n] {
			w := math.Exp(x)
			if math.Float64bits(got[i]) != math.Float64bits(w) && !(got[i] != got[i] && w != w) {
				t.Fatalf("exp64Into(%v [%#016x]) = %v [%#016x], math.Exp gives %v [%#016x]", x, math.Float64bits(x),
					got[i], math.Float64bits(got[i]), w, math.Float64bits(w))
			}
		}
	}
	if !exp64Vector {
		t.Log("no AVX-512 here: math.Exp element by element")
	}
}

// BenchmarkExp64Ops times host sampling's float64 e^x at Qwen2.5's
// vocabulary, with the vector kernel and then element by element
// (expNoVector), alternating in the same run, and reports the ratio
// vector ÷ scalar of the best times (go test -run XXX -bench Exp64Ops
// -benchtime 3x ./model). The CPU device's float32 ops have theirs in
// package model/cpu (BenchmarkExpOps).
func BenchmarkExp64Ops(b *testing.B) {
	const V = 151936
	rng := rand.New(rand.NewPCG(1, 1))
	src, src64, dst64 := make([]float32, V), make([]float64, V), make([]float64, V)
	for i := range src {
		src[i] = float32((rng.Float64()*2 - 1) * 3)
		src64[i] = float64(src[i])
	}
	var ids []int32
	ops := []struct {
		name string
		run  func()
	}{
		{"exp64Into 151936", func() { exp64Into(dst64, src64) }},
		{"SampleToken V151936 T1 x8", func() {
			for i := range 8 {
				SampleToken(src, Sampling{Temperature: 1, TopP: 1, TopK: -1}, rand.New(rand.NewPCG(uint64(i), 0)), &ids)
			}
		}},
	}
	best := make([][2]time.Duration, len(ops))
	for i := range best {
		best[i] = [2]time.Duration{1 << 62, 1 << 62}
	}
	defer func() { expNoVector = false }()
	for b.Loop() {
		for i, op := range ops {
			for v, scalar := range []bool{false, true} {
				expNoVector = scalar
				t0 := time.Now()
				op.run()
				best[i][v] = min(best[i][v], time.Since(t0))
			}
		}
	}
	for i, op := range ops {
		fmt.Printf("%-36s vector %8.1f ms  scalar %8.1f ms  vector/scalar %.3f\n", op.name,
			best[i][0].Seconds()*1e3, best[i][1].Seconds()*1e3, best[i][0].Seconds()/best[i][1].Seconds())
		b.ReportMetric(best[i][0].Seconds()/best[i][1].Seconds(), fmt.Sprintf("ratio-%d", i))
	}
}

// sampleFormer is SampleToken's former full-vocabulary path (no top-k, no
// top-p), math.Exp element by element.
func sampleFormer(logits []float32, temp float64, rng *rand.Rand) (int32, float32) {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	invT := 1 / temp
	m := float64(logits[best]) * invT
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v)*invT - m)
	}
	lse := m + math.Log(sum)
	logp := func(i int) float64 { return float64(logits[i])*invT - lse }
	u := rng.Float64()
	var c float64
	for i := range logits {
		c += math.Exp(logp(i))
		if u < c {
			return int32(i), float32(logp(i))
		}
	}
	return int32(best), float32(logp(best))
}

// SampleToken with the vector exp draws the former loop's tokens with the
// same log-probabilities, and so do its truncated paths with and without
// the vector kernel.
func TestSampleTokenBitForBitFormer(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	var scratch []int32
	for _, V := range []int{5003, 151936} {
		logits := randF32(rng, V, 4)
		for _, temp := range []float64{1, 0.7, 1.3} {
			for seed := range uint64(200) {
				tok, lp := SampleToken(logits, Sampling{Temperature: temp, TopP: 1, TopK: -1}, rand.New(rand.NewPCG(seed, 1)), &scratch)
				wt, wlp := sampleFormer(logits, temp, rand.New(rand.NewPCG(seed, 1)))
				if tok != wt || math.Float32bits(lp) != math.Float32bits(wlp) {
					t.Fatalf("V %d, T %g, seed %d: token %d (logprob %g), the former loop %d (%g)", V, temp, seed, tok, lp, wt, wlp)
				}
			}
			if V > 5003 {
				continue // the truncated paths sort the vocabulary: the small one is enough
			}
			for _, sp := range []Sampling{{Temperature: temp, TopP: 0.9, TopK: -1}, {Temperature: temp, TopP: 1, TopK: 50}} {
				for seed := range uint64(20) {
					type r struct {
						tok int32
						lp  float32
					}
					v, s := runBoth(func() r {
						tok, lp := SampleToken(logits, sp, rand.New(rand.NewPCG(seed, 2)), &scratch)
						return r{tok, lp}
					})
					if v != s {
						t.Fatalf("V %d, %+v, seed %d: %v with the vector exp, %v without", V, sp, seed, v, s)
					}
				}
			}
		}
	}
}
