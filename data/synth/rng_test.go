package synth

import (
	"slices"
	"testing"
)

func TestSourcePermIsUniform(t *testing.T) {
	// Each value lands in each position about equally often over many
	// seeds: chi-square over a 5x5 table (16 dof, 0.999 quantile 39.25).
	const n, draws = 5, 20000
	var counts [n][n]float64
	for seed := range uint64(draws) {
		p := newRNG(seed, 3).Perm(n)
		if !slices.Equal(slices.Sorted(slices.Values(p)), []int{0, 1, 2, 3, 4}) {
			t.Fatalf("Perm gave %v", p)
		}
		for pos, v := range p {
			counts[pos][v]++
		}
	}
	chi, expected := 0.0, float64(draws)/n
	for i := range n {
		for j := range n {
			d := counts[i][j] - expected
			chi += d * d / expected
		}
	}
	if chi > 39.25 {
		t.Fatalf("chi-square %.1f: biased", chi)
	}
	// IntN stays in range for bounds that are not powers of two.
	r := newRNG(1, 1)
	for range 10000 {
		if v := r.IntN(7); v < 0 || v >= 7 {
			t.Fatalf("IntN(7) = %d", v)
		}
	}
}
