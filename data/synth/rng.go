package synth

import (
	"math/bits"
	"math/rand/v2"
)

// source is the world's random source: PCG, whose output the algorithm's
// specification fixes, with the bounded draw and the shuffle written here.
// math/rand/v2 does not promise that Rand.IntN or Rand.Shuffle keep their
// sequences across Go releases; a world must stay the same world.
type source struct{ pcg *rand.PCG }

func newRNG(seed, stream uint64) *source { return &source{rand.NewPCG(seed, stream)} }

// IntN draws uniformly from [0, n) by Lemire's multiply-and-reject; n > 0.
func (r *source) IntN(n int) int {
	bound := uint64(n)
	hi, lo := bits.Mul64(r.pcg.Uint64(), bound)
	if lo < bound {
		threshold := -bound % bound
		for lo < threshold {
			hi, lo = bits.Mul64(r.pcg.Uint64(), bound)
		}
	}
	return int(hi)
}

// Shuffle is a Fisher-Yates shuffle of n elements.
func (r *source) Shuffle(n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		swap(i, r.IntN(i+1))
	}
}

// Perm is a random permutation of 0..n-1.
func (r *source) Perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	r.Shuffle(n, func(i, j int) { p[i], p[j] = p[j], p[i] })
	return p
}

// Float64 draws uniformly from [0, 1) with 53 random bits.
func (r *source) Float64() float64 { return float64(r.pcg.Uint64()>>11) / (1 << 53) }
