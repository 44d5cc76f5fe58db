package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotKernelsAgainstFloat64 calls every dot kernel the CPU has directly:
// the one-row kernel (dot1) and the two-row kernel, with distinct B rows
// (padded pitch) and with one row repeated by a zero stride, over k from
// none to many steps, odd and even step counts (dot1 takes two steps at a
// time and one odd step at the end).
func TestDotKernelsAgainstFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tested := 0
	for _, kern := range kernels {
		if kern.dot == nil {
			continue
		}
		tested++
		for _, steps := range []int{0, 1, 2, 3, 4, 5, 8, 31, 32, 96} {
			k := steps * kern.dotStep
			for _, pad := range []int{0, 3, -1} { // -1: zero stride
				ld := k + pad
				rows := 4
				if pad < 0 {
					ld, rows = 0, 1
				}
				b := make([]float32, rows*max(ld, k)+k+1)
				a0, a1 := make([]float32, k+1), make([]float32, k+1)
				for i := range b {
					b[i] = rng.Float32()*2 - 1
				}
				for i := range a0 {
					a0[i], a1[i] = rng.Float32()*2-1, rng.Float32()*2-1
				}
				want := func(a []float32, r int) (dot, tol float64) {
					var mag float64
					for p := 0; p < k; p++ {
						x := float64(a[p]) * float64(b[r*ld+p])
						dot += x
						mag += math.Abs(x)
					}
					return dot, float64(2*k+8) * u * mag
				}
				label := fmt.Sprintf("%s k=%d ld=%d", kern.name, k, ld)
				var out [8]float32
				kern.dot(k, &a0[0], &a1[0], &b[0], uintptr(ld)*4, &out)
				for r := 0; r < 4; r++ {
					for i, a := range [2][]float32{a0, a1} {
						w, tol := want(a, r)
						if err := math.Abs(float64(out[2*r+i]) - w); !(err <= tol) {
							t.Errorf("%s: dot out[%d] = %v, want %v (error %.3g > %.3g)", label, 2*r+i, out[2*r+i], w, err, tol)
						}
					}
				}
				if kern.dot1 == nil {
					continue
				}
				o1 := [4]float32{9, 9, 9, 9} // must be overwritten, not added to
				kern.dot1(k, &a0[0], &b[0], uintptr(ld)*4, &o1)
				for r := 0; r < 4; r++ {
					w, tol := want(a0, r)
					if err := math.Abs(float64(o1[r]) - w); !(err <= tol) {
						t.Errorf("%s: dot1 out[%d] = %v, want %v (error %.3g > %.3g)", label, r, o1[r], w, err, tol)
					}
				}
			}
		}
	}
	t.Logf("%d kernels with a dot kernel on this CPU (%v)", tested, Kernels())
}

// TestSgemmFewRowsAgainstFloat64 covers the few-rows path the way decode
// uses it: one row of op(A) (the one-row kernel), odd row counts (pairs and
// a lone last row), k below, at and around multiples of every kernel's step,
// n not a multiple of four, every alpha/beta case, both transposes of A, and
// the few-columns case (A's rows wide, n odd). Every kernel, one and two
// threads.
func TestSgemmFewRowsAgainstFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	es := engines(t, 1, 2)
	ks := []int{1, 5, 8, 9, 15, 16, 17, 24, 31, 32, 33, 48, 100, 515}
	type shape struct{ m, n, k int }
	var cases []shape
	for _, m := range []int{1, 2, 3, 7} {
		for _, n := range []int{1, 3, 4, 6, 13, 67} {
			for _, k := range ks {
				cases = append(cases, shape{m, n, k})
			}
		}
	}
	for _, m := range []int{9, 37} { // few columns: n ≤ smallRows, A's rows wide
		for _, n := range []int{1, 3} {
			for _, k := range ks {
				cases = append(cases, shape{m, n, k})
			}
		}
	}
	for ci, s := range cases {
		for _, transA := range []bool{false, true} {
			ab := alphaBetas[ci%len(alphaBetas)]
			pad := ci % 3
			p := newProblem(rng, transA, true, s.m, s.n, s.k, pad, ab.alpha, ab.beta, ab.nanC)
			for _, e := range es {
				p.check(t, fmt.Sprintf("%s/%d %dx%dx%d transA=%v alpha=%v beta=%v pad=%d",
					e.Kernel(), e.threads, s.m, s.n, s.k, transA, ab.alpha, ab.beta, pad), p.run(e))
			}
		}
	}
}
