package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSampleTokenDistribution draws many tokens and compares frequencies
// with the distribution each setting defines, computed here directly.
func TestSampleTokenDistribution(t *testing.T) {
	logits := []float32{1.0, 2.5, 0.3, 2.5, -1.0, 0.9}
	want := func(s Sampling) []float64 {
		p := make([]float64, len(logits))
		var z float64
		for i, v := range logits {
			p[i] = math.Exp(float64(v) / s.Temperature)
			z += p[i]
		}
		for i := range p {
			p[i] /= z
		}
		// Order by probability, ties by id (stable), keep top-k, then top-p.
		order := []int{1, 3, 0, 5, 2, 4}
		k := s.TopK
		if k <= 0 {
			k = len(order)
		}
		keep := map[int]bool{}
		var mass float64
		for j, id := range order[:k] {
			keep[id] = true
			mass += p[id]
			if mass >= s.TopP {
				_ = j
				break
			}
		}
		var tot float64
		for i := range p {
			if !keep[i] {
				p[i] = 0
			}
			tot += p[i]
		}
		for i := range p {
			p[i] /= tot
		}
		return p
	}
	for _, s := range []Sampling{
		{Temperature: 1, TopP: 1, TopK: -1},
		{Temperature: 0.7, TopP: 1, TopK: 3},
		{Temperature: 1.3, TopP: 0.8, TopK: -1},
		{Temperature: 1, TopP: 0.5, TopK: 4},
	} {
		rng := rand.New(rand.NewPCG(1, 2))
		const n = 200000
		count := make([]float64, len(logits))
		var scratch []int32
		for i := 0; i < n; i++ {
			id, lp := SampleToken(logits, s, rng, &scratch)
			count[id]++
			// The reported logprob is under softmax(logits/T), untruncated.
			var z float64
			for _, v := range logits {
				z += math.Exp(float64(v) / s.Temperature)
			}
			if d := math.Abs(float64(lp) - (float64(logits[id])/s.Temperature - math.Log(z))); d > 1e-5 {
				t.Fatalf("%+v: logprob of %d off by %v", s, id, d)
			}
		}
		p := want(s)
		for i := range count {
			f := count[i] / n
			if sd := math.Sqrt(p[i]*(1-p[i])/n) + 1e-9; math.Abs(f-p[i]) > 5*sd {
				t.Errorf("%+v: token %d frequency %.4f, want %.4f", s, i, f, p[i])
			}
		}
	}
	if id, _ := SampleToken(logits, Greedy, nil, nil); id != 1 {
		t.Fatalf("greedy picked %d, want the lowest id among the tied maxima (1)", id)
	}
}

// BenchmarkSampleToken draws from one row of Qwen2.5's 151,936 logits at
// temperature 1 (the rollout's setting), the host's share of a decode
// step: a batch of 32 draws 32 such rows.
func BenchmarkSampleToken(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, 151936)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	s := Sampling{Temperature: 1, TopP: 1, TopK: -1}
	rng := rand.New(rand.NewPCG(3, 4))
	var scratch []int32
	for b.Loop() {
		SampleToken(logits, s, rng, &scratch)
	}
	b.ReportMetric(float64(len(logits))*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mlogits/s")
}

// TestArgmaxMatchesLoop compares argmax with the plain loop it replaces on
// rows of every length up to 70 and a vocabulary's, with ties, signed
// zeros, infinities and NaNs placed first, inside and in the tail.
func TestArgmaxMatchesLoop(t *testing.T) {
	loop := func(x []float32) int {
		best := 0
		for i, v := range x {
			if v > x[best] {
				best = i
			}
		}
		return best
	}
	r := rand.New(rand.NewPCG(9, 10))
	nan := float32(math.NaN())
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), nan, 3, -3}
	for trial := 0; trial < 4000; trial++ {
		n := 1 + r.IntN(70)
		if trial%100 == 0 {
			n = 151936
		}
		x := make([]float32, n)
		for i := range x {
			switch r.IntN(4) {
			case 0:
				x[i] = special[r.IntN(len(special))]
			case 1:
				x[i] = float32(r.IntN(3)) // ties
			default:
				x[i] = float32(r.NormFloat64())
			}
			if trial%3 == 0 && x[i] != x[i] {
				x[i] = 1 // a third of the rows without NaN
			}
		}
		if got, want := ArgMax(x), loop(x); got != want {
			t.Fatalf("row of %d: argmax %d (%v), the loop %d (%v)", n, got, x[got], want, x[want])
		}
		// rowMax: the largest value's bits up to the sign of a zero, or
		// false exactly where a NaN is.
		hasNaN := slices.ContainsFunc(x, func(v float32) bool { return v != v })
		m, ok := RowMax(x)
		if ok == hasNaN || ok && m != x[loop(x)] {
			t.Fatalf("row of %d: rowMax %v, %v; the loop's largest %v, NaN %v", n, m, ok, x[loop(x)], hasNaN)
		}
	}
}

// TestDrawFromPrefixIsTheInOrderDraw puts u where the prefix draw could
// go wrong: on the in-order pass's running sums c_i, one ulp either side
// and 10⁻¹⁰ either side, besides random u. Wherever drawFromPrefix answers
// it must pick drawInOrder's token; on the boundaries it must decline
// (else the margin is not doing its work), and for random u it answers.
func TestDrawFromPrefixIsTheInOrderDraw(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, V := range []int{1000, 5003, 151936} {
		for _, scale := range []float64{1, 4, 30} {
			logits := make([]float32, V)
			for i := range logits {
				logits[i] = float32(r.NormFloat64() * scale)
			}
			for _, temp := range []float64{1, 0.7} {
				invT := 1 / temp
				best := ArgMax(logits)
				m := float64(logits[best]) * invT
				blocks := (V + SampleBlock - 1) / SampleBlock
				arg, ex, starts := make([]float64, SampleBlock), make([]float64, SampleBlock), make([]float64, blocks)
				sum := sumExps(logits, invT, m, arg, ex, starts)
				lse := m + math.Log(sum)
				// The in-order running sums.
				c := make([]float64, V)
				var run float64
				for i, v := range logits {
					run += math.Exp(float64(v)*invT - lse)
					c[i] = run
				}
				var us []float64
				for range 300 {
					us = append(us, r.Float64())
				}
				random := len(us)
				for range 100 {
					ci := c[r.IntN(V)]
					us = append(us, ci, math.Nextafter(ci, 0), math.Nextafter(ci, 2), ci-1e-10, ci+1e-10)
				}
				declined := [2]int{}
				for q, u := range us {
					if u < 0 || u >= 1 {
						continue
					}
					want := drawInOrder(logits, invT, lse, u, arg, ex, best)
					got, ok := drawFromPrefix(logits, invT, m, sum, starts, u, arg, ex)
					if !ok {
						declined[min(q/random, 1)]++
						continue
					}
					if got != want {
						t.Fatalf("V %d scale %g T %g u %v: prefix draw %d, in-order %d", V, scale, temp, u, got, want)
					}
				}
				if declined[0] > random/50 || declined[1] < 100 {
					t.Fatalf("V %d scale %g T %g: declined %d of %d random u and %d of 500 boundary u", V, scale, temp, declined[0], random, declined[1])
				}
			}
		}
	}
}
