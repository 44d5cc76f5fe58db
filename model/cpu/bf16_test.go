package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/r1go/r1go/internal/bf16"
	"github.com/r1go/r1go/model"
)

// TestGemmBF16AgainstFloat64 checks Gemm with a bf16 B, in both layouts and
// over several widened panels (k = 8192 gives 32-column panels), against a
// float64 product of the widened values.
func TestGemmBF16AgainstFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	d := New().(*Device[float32])
	for _, tc := range []struct {
		transA, transB bool
		m, n, k        int
	}{{false, true, 5, 70, 8192}, {false, false, 3, 70, 8192}, {true, true, 17, 33, 96}, {false, true, 1, 1000, 64}} {
		a := make([]float32, tc.m*tc.k)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		bh := make(bf16Buf, tc.n*tc.k)
		for i := range bh {
			bh[i] = bf16.FromFloat32(float32(rng.NormFloat64()))
		}
		c := make([]float32, tc.m*tc.n)
		for i := range c {
			c[i] = float32(rng.NormFloat64())
		}
		c0 := append([]float32(nil), c...)
		lda, ldb := tc.k, tc.k
		if tc.transA {
			lda = tc.m
		}
		if !tc.transB {
			ldb = tc.n
		}
		d.Gemm(tc.transA, tc.transB, tc.m, tc.n, tc.k, 0.5, cpuBuf[float32](a), lda, bh, ldb, 2, cpuBuf[float32](c), tc.n)
		for i := 0; i < tc.m; i++ {
			for j := 0; j < tc.n; j++ {
				var s, mag float64
				for p := 0; p < tc.k; p++ {
					x := a[i*lda+p]
					if tc.transA {
						x = a[p*lda+i]
					}
					y := bh[j*ldb+p]
					if !tc.transB {
						y = bh[p*ldb+j]
					}
					s += float64(x) * float64(bf16.ToFloat32(y))
					mag += math.Abs(float64(x) * float64(bf16.ToFloat32(y)))
				}
				want := 0.5*s + 2*float64(c0[i*tc.n+j])
				if e := math.Abs(float64(c[i*tc.n+j]) - want); e > 1e-6*(mag+1) {
					t.Fatalf("%+v: c[%d,%d] = %v, float64 says %v", tc, i, j, c[i*tc.n+j], want)
				}
			}
		}
	}
}

// TestAdamWBF16Moments compares AdamW with bf16 moments to the float32 one
// over 300 steps of a noisy gradient: with β₂ = 0.999 each update of v is
// 0.1 % of it, below half a bf16 step, so round-to-nearest would freeze v;
// stochastic rounding follows the float32 moments on average.
func TestAdamWBF16Moments(t *testing.T) {
	d := New().(*Device[float32])
	const n = 4096
	rng := rand.New(rand.NewPCG(1, 2))
	p32, p16 := make(cpuBuf[float32], n), make(cpuBuf[float32], n)
	m32, v32 := make(cpuBuf[float32], n), make(cpuBuf[float32], n)
	m16, v16 := make(bf16Buf, n), make(bf16Buf, n)
	g := make(cpuBuf[float32], n)
	for step := 1; step <= 300; step++ {
		for i := range g {
			g[i] = float32(1 + 0.5*rng.NormFloat64())
		}
		hp := model.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: step, GradScale: 1}
		d.AdamW(p32, g, m32, v32, hp)
		d.AdamW(p16, g, m16, v16, hp)
	}
	var sv32, sv16, sm32, sm16, dp float64
	for i := range n {
		sv32 += float64(v32[i])
		sv16 += float64(bf16.ToFloat32(v16[i]))
		sm32 += float64(m32[i])
		sm16 += float64(bf16.ToFloat32(m16[i]))
		dp = max(dp, math.Abs(float64(p32[i]-p16[i])))
	}
	if r := sv16 / sv32; math.Abs(r-1) > 0.01 {
		t.Fatalf("mean second moment: bf16 / float32 = %.4f", r)
	}
	if r := sm16 / sm32; math.Abs(r-1) > 0.01 {
		t.Fatalf("mean first moment: bf16 / float32 = %.4f", r)
	}
	// 300 steps of lr 1e-3 move a weight by about 0.3; bf16 moments stay within 3 % of that.
	if dp > 1e-2 {
		t.Fatalf("weights after 300 steps differ by up to %.3g", dp)
	}
}

// widenInto gives widen's exact bits for all 65,536 bf16 patterns (NaNs
// with their payloads too), at lengths around the kernels' 16 and 8 lanes,
// and so does every widening kernel this CPU runs.
func TestWidenIntoAllPatterns(t *testing.T) {
	src := make([]uint16, 1<<16+7)
	for i := range src {
		src[i] = uint16(i * 40503) // every pattern once in the first 65,536 (40503 is odd)
	}
	for name, kern := range widenKernels() {
		got := make([]float32, 1<<16)
		kern(&got[0], &src[0], len(got))
		for i, h := range src[:len(got)] {
			if g, w := math.Float32bits(got[i]), math.Float32bits(bf16.ToFloat32(h)); g != w {
				t.Fatalf("%s: element %d (bf16 %#04x): %#08x, want %#08x", name, i, h, g, w)
			}
		}
	}
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 33, len(src)} {
		got := make([]float32, n)
		widenInto(got, src[:n])
		for i, h := range src[:n] {
			if g, w := math.Float32bits(got[i]), math.Float32bits(bf16.ToFloat32(h)); g != w {
				t.Fatalf("n=%d, element %d (bf16 %#04x): %#08x, want %#08x", n, i, h, g, w)
			}
		}
	}
}

// A bf16 B gives the float32 product of its widened values bit for bit,
// transposed or not, whichever panels gemmBF16 widens: few rows (1 MiB panels), many rows
// (panels up to wideFloats, A packed once), ragged and whole 32-column
// panels.
func TestGemmBF16SameBitsAsWidened(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	d := New().(*Device[float32])
	for _, tc := range []struct{ m, n, k int }{{5, 1000, 600}, {70, 1000, 600}, {300, 37, 96}, {65, 4100, 290}} {
		a := make([]float32, tc.m*tc.k)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		bh := make(bf16Buf, tc.n*tc.k)
		bw := make([]float32, tc.n*tc.k)
		for i := range bh {
			bh[i] = bf16.FromFloat32(float32(rng.NormFloat64()))
			bw[i] = bf16.ToFloat32(bh[i])
		}
		for _, transB := range []bool{true, false} { // B as [n, k], or the same values read as [k, n]
			ldb := tc.k
			if !transB {
				ldb = tc.n
			}
			got, want := make([]float32, tc.m*tc.n), make([]float32, tc.m*tc.n)
			d.Gemm(false, transB, tc.m, tc.n, tc.k, 1, cpuBuf[float32](a), tc.k, bh, ldb, 0, cpuBuf[float32](got), tc.n)
			d.Gemm(false, transB, tc.m, tc.n, tc.k, 1, cpuBuf[float32](a), tc.k, cpuBuf[float32](bw), ldb, 0, cpuBuf[float32](want), tc.n)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%+v transB=%v: c[%d] = %v from bf16, %v from the widened float32 B", tc, transB, i, got[i], want[i])
				}
			}
		}
	}
}
