package model

import (
	"math"
	"math/rand/v2"
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
