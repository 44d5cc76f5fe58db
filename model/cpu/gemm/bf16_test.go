package gemm

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSgemmBF16TransBAgainstFloat64 checks the bf16 dot path (the assembly
// kernel where the CPU has one, and the Go tail and odd row groups) against
// float64 dot products of the widened weights.
func TestSgemmBF16TransBAgainstFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	t.Logf("assembly kernel: %v", HasBF16Kernel())
	for _, tc := range []struct{ m, n, k, lda, ldb int }{
		{1, 37, 896, 896, 896}, {2, 9, 50, 53, 61}, {1, 4, 16, 16, 16}, {1, 130, 4864, 4864, 4864}, {2, 3, 7, 7, 7},
	} {
		a := make([]float32, (tc.m-1)*tc.lda+tc.k)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		b := make([]uint16, (tc.n-1)*tc.ldb+tc.k)
		for i := range b {
			b[i] = uint16(math.Float32bits(float32(rng.NormFloat64())) >> 16)
		}
		c := make([]float32, tc.m*tc.n)
		for i := range c {
			c[i] = float32(rng.NormFloat64())
		}
		c0 := append([]float32(nil), c...)
		for _, beta := range []float32{0, 0.5} {
			copy(c, c0)
			SgemmBF16TransB(tc.m, tc.n, tc.k, 1.5, a, tc.lda, b, tc.ldb, beta, c, tc.n, 2)
			for i := 0; i < tc.m; i++ {
				for j := 0; j < tc.n; j++ {
					var s, mag float64
					for p := 0; p < tc.k; p++ {
						w := float64(math.Float32frombits(uint32(b[j*tc.ldb+p]) << 16))
						s += float64(a[i*tc.lda+p]) * w
						mag += math.Abs(float64(a[i*tc.lda+p]) * w)
					}
					want := 1.5 * s
					if beta != 0 {
						want += float64(beta) * float64(c0[i*tc.n+j])
					}
					if e := math.Abs(float64(c[i*tc.n+j]) - want); e > 2e-6*(mag+1) {
						t.Fatalf("%+v beta %v: c[%d,%d] = %v, float64 says %v", tc, beta, i, j, c[i*tc.n+j], want)
					}
				}
			}
		}
	}
}

// TestSgemmBF16TransBOneRowSameBitsAsWidened: one row against bf16 weights
// gives the bits of the float32 product against the widened weights (the
// same sums per row, in the same order), for ragged row groups, k with and
// without a tail, alpha and beta: a bf16 model decodes what its float32
// copy decodes, at whichever tier R1GO_CPU leaves (a tier's own kernels
// are paired, so the bits differ between tiers, not within one).
func TestSgemmBF16TransBOneRowSameBitsAsWidened(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	t.Logf("default kernel %s, bf16 assembly kernel %v", Kernels()[0], HasBF16Kernel())
	for _, tc := range []struct{ n, k int }{{37, 896}, {4, 16}, {9, 512}, {130, 1408}, {6, 40}, {512, 4864}, {5, 48}, {11, 1424}, {7, 901}} {
		a := make([]float32, tc.k)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		b16 := make([]uint16, tc.n*tc.k)
		b32 := make([]float32, tc.n*tc.k)
		for i := range b16 {
			b16[i] = uint16(math.Float32bits(float32(rng.NormFloat64())) >> 16)
			b32[i] = math.Float32frombits(uint32(b16[i]) << 16)
		}
		c0 := make([]float32, tc.n)
		for i := range c0 {
			c0[i] = float32(rng.NormFloat64())
		}
		for _, ab := range [][2]float32{{1, 0}, {1.5, 0.5}} {
			got, want := append([]float32(nil), c0...), append([]float32(nil), c0...)
			SgemmBF16TransB(1, tc.n, tc.k, ab[0], a, tc.k, b16, tc.k, ab[1], got, tc.n, 2)
			Sgemm(false, true, 1, tc.n, tc.k, ab[0], a, tc.k, b32, tc.k, ab[1], want, tc.n)
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Fatalf("n %d k %d alpha %g beta %g: c[%d] = %v, the widened float32 product %v", tc.n, tc.k, ab[0], ab[1], j, got[j], want[j])
				}
			}
		}
	}
}

// TestDot1BF16SameBitsAsDot1 checks every one-row bf16 kernel this CPU
// runs (not only the default's: an AVX-512 machine also checks the AVX2 and
// Go pairs) against its float32 twin on the widened rows: same bits, for
// four distinct rows and for one row repeated (ldb 0).
func TestDot1BF16SameBitsAsDot1(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, kern := range kernels {
		if kern.dot1BF16 == nil {
			t.Logf("%s: no bf16 twin", kern.name)
			continue
		}
		for _, steps := range []int{1, 2, 3, 56, 57} {
			k := steps * kern.dotStep
			a := make([]float32, k)
			for i := range a {
				a[i] = float32(rng.NormFloat64())
			}
			b16 := make([]uint16, 4*k)
			b32 := make([]float32, 4*k)
			for i := range b16 {
				b16[i] = uint16(math.Float32bits(float32(rng.NormFloat64())) >> 16)
				b32[i] = math.Float32frombits(uint32(b16[i]) << 16)
			}
			for _, ld := range []uintptr{uintptr(k), 0} {
				var got, want [4]float32
				kern.dot1BF16(k, &a[0], &b16[0], 2*ld, &got)
				kern.dot1(k, &a[0], &b32[0], 4*ld, &want)
				for r := range got {
					if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
						t.Fatalf("%s k %d ldb %d: row %d sums to %v from bf16, %v from float32", kern.name, k, ld, r, got[r], want[r])
					}
				}
			}
		}
	}
}

// BenchmarkDecodeBF16 compares one decode-shaped product (1×896 by
// 4864×896 weights) with bf16 and float32 weights.
func BenchmarkDecodeBF16(bm *testing.B) {
	const n, k = 4864, 896
	a := make([]float32, k)
	b16 := make([]uint16, n*k)
	b32 := make([]float32, n*k)
	c := make([]float32, n)
	bm.Run("bf16", func(bm *testing.B) {
		bm.SetBytes(int64(2 * n * k))
		for range bm.N {
			SgemmBF16TransB(1, n, k, 1, a, k, b16, k, 0, c, n, 0)
		}
	})
	bm.Run("f32", func(bm *testing.B) {
		bm.SetBytes(int64(4 * n * k))
		for range bm.N {
			Sgemm(false, true, 1, n, k, 1, a, k, b32, k, 0, c, n)
		}
	})
}
