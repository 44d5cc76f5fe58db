package gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// FuzzSgemm runs random small products through every kernel, one and two
// threads, and checks them against the float64 reference. The inputs pick
// the shape, transposes, padding, alpha/beta case and data seed.
func FuzzSgemm(f *testing.F) {
	f.Add(uint8(1), uint8(1), uint8(1), uint8(0), uint8(0), uint64(1))
	f.Add(uint8(17), uint8(33), uint8(65), uint8(3), uint8(7), uint64(2))
	f.Add(uint8(13), uint8(1), uint8(40), uint8(1), uint8(2), uint64(3))
	f.Add(uint8(0), uint8(9), uint8(9), uint8(2), uint8(1), uint64(4))
	f.Add(uint8(25), uint8(70), uint8(0), uint8(0), uint8(4), uint64(5))
	f.Add(uint8(12), uint8(32), uint8(8), uint8(1), uint8(9), uint64(6))
	es := engines(f, 1, 2)
	f.Fuzz(func(t *testing.T, m, n, k, trans, mode uint8, seed uint64) {
		mm, nn, kk := int(m%80), int(n%80), int(k%80)
		ab := alphaBetas[int(mode)%len(alphaBetas)]
		pad := int(mode/8) % 4
		rng := rand.New(rand.NewPCG(seed, 99))
		p := newProblem(rng, trans&1 != 0, trans&2 != 0, mm, nn, kk, pad, ab.alpha, ab.beta, ab.nanC)
		for _, e := range es {
			p.check(t, fmt.Sprintf("%s/%d %dx%dx%d trans=%d alpha=%v beta=%v pad=%d",
				e.Kernel(), e.threads, mm, nn, kk, trans&3, ab.alpha, ab.beta, pad), p.run(e))
		}
	})
}
