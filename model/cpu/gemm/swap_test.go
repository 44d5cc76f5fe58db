package gemm

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSwappedBitForBit: a few dozen rows times a transposed weight through
// the swapped path (Cᵀ = W·Aᵀ, transposed back) equals the direct packed
// path bit for bit, for depths of one and several slices, alpha ≠ 1, edge
// tiles and leading dimensions wider than the rows; and it did take the
// swapped path.
func TestSwappedBitForBit(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, kn := range Kernels() {
		swap, err := NewEngine(kn, 2)
		if err != nil {
			t.Fatal(err)
		}
		direct := *swap
		direct.noSwap = true
		for _, sh := range []struct{ m, n, k int }{{9, 256, 64}, {32, 1152, 896}, {32, 4864, 896}, {33, 900, 1300}, {64, 896, 4864}, {17, 300, 3}} {
			lda, ldb, ldc := sh.k+3, sh.k+5, sh.n+7
			a, b := make([]float32, sh.m*lda), make([]float32, sh.n*ldb)
			for i := range a {
				a[i] = float32(rng.NormFloat64())
			}
			for i := range b {
				b[i] = float32(rng.NormFloat64())
			}
			j := job{transA: false, transB: true, m: sh.m, n: sh.n, k: sh.k, beta: 0}
			if !swap.useSwap(&j) {
				t.Fatalf("%v: the swapped path is not taken", sh)
			}
			c1, c2 := make([]float32, sh.m*ldc), make([]float32, sh.m*ldc)
			for i := range c1 {
				c1[i], c2[i] = float32(math.NaN()), float32(math.NaN()) // beta 0: never read
			}
			swap.Sgemm(false, true, sh.m, sh.n, sh.k, 0.7, a, lda, b, ldb, 0, c1, ldc)
			direct.Sgemm(false, true, sh.m, sh.n, sh.k, 0.7, a, lda, b, ldb, 0, c2, ldc)
			for i := 0; i < sh.m; i++ {
				for c := 0; c < sh.n; c++ {
					x, y := c1[i*ldc+c], c2[i*ldc+c]
					if math.Float32bits(x) != math.Float32bits(y) {
						t.Fatalf("%s %v: C[%d][%d] swapped %v, direct %v", kn, sh, i, c, x, y)
					}
				}
			}
		}
	}
}

// The kernel that prefetches the next tile's rows of A computes what the
// plain one does, bit for bit, at depths around its 16-step unrolling.
func TestSwappedPrefetchBitForBit(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	on := &Engine{kern: kernels[0], threads: 2}
	off := &Engine{kern: kernels[0], threads: 2, noPrefetchA: true}
	for _, k := range []int{1, 3, 15, 16, 17, 33, 63, 448, 896, 1300} {
		const m, n = 32, 397 // 33 tiles of 12 weight rows and a partial one
		a, b := make([]float32, m*k), make([]float32, n*k)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		for i := range b {
			b[i] = float32(rng.NormFloat64())
		}
		c1, c2 := make([]float32, m*n), make([]float32, m*n)
		on.Sgemm(false, true, m, n, k, 0.5, a, k, b, k, 0, c1, n)
		off.Sgemm(false, true, m, n, k, 0.5, a, k, b, k, 0, c2, n)
		for i := range c1 {
			if math.Float32bits(c1[i]) != math.Float32bits(c2[i]) {
				t.Fatalf("%s, k %d: C[%d] = %v with prefetching, %v without", kernels[0].name, k, i, c1[i], c2[i])
			}
		}
	}
}
