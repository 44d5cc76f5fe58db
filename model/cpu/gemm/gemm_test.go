package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// u is the unit roundoff of float32.
const u = 1.0 / (1 << 24)

// problem is one Sgemm call with its inputs laid out in padded buffers.
type problem struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b, c        []float32
	lda, ldb, ldc  int
	want, tol      []float64 // reference result and error bound, m×n
}

// newProblem fills A, B and C with values in [-1, 1); pad extra columns on
// every leading dimension. C's padding holds a sentinel the tests check.
func newProblem(rng *rand.Rand, transA, transB bool, m, n, k, pad int, alpha, beta float32, nanC bool) *problem {
	p := &problem{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta}
	rowsA, colsA := m, k
	if transA {
		rowsA, colsA = k, m
	}
	rowsB, colsB := k, n
	if transB {
		rowsB, colsB = n, k
	}
	p.lda, p.ldb, p.ldc = max(1, colsA)+pad, max(1, colsB)+pad, max(1, n)+pad
	fill := func(rows, ld int) []float32 {
		x := make([]float32, rows*ld)
		for i := range x {
			x[i] = rng.Float32()*2 - 1
		}
		return x
	}
	p.a, p.b = fill(rowsA, p.lda), fill(rowsB, p.ldb)
	p.c = make([]float32, m*p.ldc)
	for i := range p.c {
		switch {
		case i%p.ldc >= n:
			p.c[i] = sentinel
		case nanC:
			p.c[i] = float32(math.NaN())
		default:
			p.c[i] = rng.Float32()*2 - 1
		}
	}
	return p
}

const sentinel = 12345.5

func (p *problem) opA(i, q int) float64 {
	if p.transA {
		return float64(p.a[q*p.lda+i])
	}
	return float64(p.a[i*p.lda+q])
}

func (p *problem) opB(q, j int) float64 {
	if p.transB {
		return float64(p.b[j*p.ldb+q])
	}
	return float64(p.b[q*p.ldb+j])
}

// reference computes, once per problem, the float64 result and the error
// bound of every element of C. The bound is (2k+8)·u·(|alpha|·Σ|a||b| +
// |beta|·|c|): k roundings in the running sum, two more per KC slice
// boundary and a few for alpha and beta, each at most u relative to the sum
// of magnitudes.
func (p *problem) reference() {
	if p.want != nil {
		return
	}
	p.want = make([]float64, p.m*p.n)
	p.tol = make([]float64, p.m*p.n)
	for i := 0; i < p.m; i++ {
		for j := 0; j < p.n; j++ {
			var dot, mag float64
			for q := 0; q < p.k; q++ {
				x := p.opA(i, q) * p.opB(q, j)
				dot += x
				mag += math.Abs(x)
			}
			c0 := float64(p.c[i*p.ldc+j])
			want := float64(p.alpha) * dot
			scale := math.Abs(float64(p.alpha)) * mag
			if p.beta != 0 {
				want += float64(p.beta) * c0
				scale += math.Abs(float64(p.beta) * c0)
			}
			p.want[i*p.n+j] = want
			p.tol[i*p.n+j] = float64(2*p.k+8) * u * scale
		}
	}
}

// check compares got (the C buffer after the call) with the reference, and
// checks that C's padding columns were left alone.
func (p *problem) check(t testing.TB, label string, got []float32) {
	t.Helper()
	p.reference()
	bad := 0
	for i := 0; i < p.m; i++ {
		for j := 0; j < p.ldc; j++ {
			g := got[i*p.ldc+j]
			if j >= p.n {
				if g != sentinel {
					t.Fatalf("%s: C[%d][%d] outside the %d columns was overwritten: %v", label, i, j, p.n, g)
				}
				continue
			}
			want, tol := p.want[i*p.n+j], p.tol[i*p.n+j]
			if err := math.Abs(float64(g) - want); !(err <= tol) {
				if bad < 5 {
					t.Errorf("%s: C[%d][%d] = %v, want %v (error %.3g > bound %.3g)", label, i, j, g, want, err, tol)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d elements outside the bound", label, bad, p.m*p.n)
	}
}

func (p *problem) run(e *Engine) []float32 {
	got := append([]float32(nil), p.c...)
	e.Sgemm(p.transA, p.transB, p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, got, p.ldc)
	return got
}

var shapes = []struct{ m, n, k int }{
	{1, 1, 1},
	{2, 3, 4},
	{17, 33, 65},
	{12, 32, 384}, // exactly one AVX-512 tile and KC block
	{13, 33, 385}, // one past each
	{6, 16, 257},  // exactly one AVX2 tile
	{1000, 3, 7},  // tall and thin
	{3, 1000, 5},  // short and wide
	{5, 7, 1000},  // deep: three KC blocks
	{4, 5, 0},     // k = 0: C = beta·C
	{0, 5, 3},     // nothing to do
	{5, 0, 3},     // nothing to do
	{257, 129, 300},
	{64, 70, 64},  // an attention block: the 8-row AVX-512 variant
	{40, 33, 129}, // 8-row variant with a KC tail

	{1, 70, 33},  // few rows: the dot-product path when B is transposed
	{3, 37, 100}, // odd rows, B rows not a multiple of 4, a k tail
	{4, 5, 16},
	{7, 45, 70},  // the most rows that still take the dot-product path, less one
	{1030, 9, 3}, // more rows than the generic kernel's A block
	{7, 2100, 3}, // more columns than the generic kernel's B block
}

var alphaBetas = []struct {
	alpha, beta float32
	nanC        bool // C holds NaN: only valid with beta = 0
}{
	{1, 0, true},
	{-1.5, 0, true},
	{1, 1, false},
	{0.5, -0.25, false},
	{0, 2, false},
}

func engines(t testing.TB, threads ...int) []*Engine {
	var es []*Engine
	for _, name := range Kernels() {
		for _, th := range threads {
			e, err := NewEngine(name, th)
			if err != nil {
				t.Fatal(err)
			}
			e.alwaysParallel = true
			es = append(es, e)
		}
	}
	return es
}

func TestSgemmAgainstFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	es := engines(t, 1, 3)
	for _, s := range shapes {
		for _, tr := range [4][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for ai, ab := range alphaBetas {
				pad := (ai % 3) * 5 // leading dimensions wider than the matrix
				p := newProblem(rng, tr[0], tr[1], s.m, s.n, s.k, pad, ab.alpha, ab.beta, ab.nanC)
				for _, e := range es {
					label := fmt.Sprintf("%s/%dthreads %dx%dx%d transA=%v transB=%v alpha=%v beta=%v pad=%d",
						e.Kernel(), e.threads, s.m, s.n, s.k, tr[0], tr[1], ab.alpha, ab.beta, pad)
					p.check(t, label, p.run(e))
				}
			}
		}
	}
}

// A product big enough to take the parallel path with several A blocks and
// B blocks per thread.
func TestSgemmLargeParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("large product")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	es := engines(t, 2)
	for _, tr := range [4][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
		for _, s := range []struct{ m, n, k int }{{3100, 600, 70}, {30, 4200, 20}} {
			p := newProblem(rng, tr[0], tr[1], s.m, s.n, s.k, 3, 1, 0.5, false)
			for _, e := range es {
				p.check(t, fmt.Sprintf("%s %dx%dx%d transA=%v transB=%v", e.Kernel(), s.m, s.n, s.k, tr[0], tr[1]), p.run(e))
			}
		}
	}
}

func TestSgemmStridedBatched(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const batch, m, n, k = 5, 33, 70, 64
	for _, e := range engines(t, 1, 2, 8) {
		var ps []*problem
		var a, b, c []float32
		for i := 0; i < batch; i++ {
			p := newProblem(rng, false, true, m, n, k, 2, 0.125, 1, false)
			ps = append(ps, p)
			a, b, c = append(a, p.a...), append(b, p.b...), append(c, p.c...)
		}
		sa, sb, sc := len(ps[0].a), len(ps[0].b), len(ps[0].c)
		e.SgemmStridedBatched(false, true, m, n, k, 0.125, a, ps[0].lda, sa, b, ps[0].ldb, sb, 1, c, ps[0].ldc, sc, batch)
		for i, p := range ps {
			p.check(t, fmt.Sprintf("%s/%d batch %d", e.Kernel(), e.threads, i), c[i*sc:(i+1)*sc])
		}
	}
}

func TestSgemmPanicsOnBadArguments(t *testing.T) {
	a, b, c := make([]float32, 6), make([]float32, 6), make([]float32, 4)
	cases := []struct {
		name string
		call func()
		want string
	}{
		{"short A", func() { Sgemm(false, false, 3, 2, 3, 1, a, 3, b, 2, 0, c, 2) }, "A is 3×3"},
		{"small lda", func() { Sgemm(false, false, 2, 2, 3, 1, a, 2, b, 2, 0, c, 2) }, "leading dimension of A"},
		{"short C", func() { Sgemm(false, false, 2, 3, 2, 1, a, 2, b, 3, 0, c, 3) }, "C is 2×3"},
		{"negative", func() { Sgemm(false, false, -1, 2, 2, 1, a, 2, b, 2, 0, c, 2) }, "negative dimension"},
		{"batch past end", func() {
			SgemmStridedBatched(false, false, 1, 1, 1, 1, a, 1, 7, b, 1, 1, 0, c, 1, 1, 2)
		}, "batch 1 starts at 7"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.HasPrefix(msg, "gemm: ") || !strings.Contains(msg, tc.want) {
					t.Fatalf("panic %q, want one starting with %q and containing %q", r, "gemm: ", tc.want)
				}
			}()
			tc.call()
		})
	}
}

func TestNewEngineRejectsUnknownKernel(t *testing.T) {
	if _, err := NewEngine("sse1", 0); err == nil || !strings.Contains(err.Error(), `"sse1"`) {
		t.Fatalf("NewEngine(sse1) error = %v, want one naming the kernel", err)
	}
	if got := Kernels(); got[len(got)-1] != "generic" {
		t.Fatalf("Kernels() = %v, want the portable kernel last", got)
	}
}

// The engine keeps no per-call state outside the call: concurrent calls (the
// model runs attention blocks on several goroutines) must not share scratch.
func TestSgemmConcurrentCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var ps []*problem
	for i := 0; i < 6; i++ {
		ps = append(ps, newProblem(rng, i%2 == 0, i%3 == 0, 40+i, 70-i, 90+3*i, 1, 1, 0, false))
	}
	for _, e := range engines(t, 2) {
		got := make([][]float32, len(ps))
		done := make(chan int)
		for i, p := range ps {
			go func() {
				got[i] = p.run(e)
				done <- i
			}()
		}
		for range ps {
			<-done
		}
		for i, p := range ps {
			p.check(t, fmt.Sprintf("%s concurrent call %d", e.Kernel(), i), got[i])
		}
	}
}

// TestTranspose8: the Go transpose moves every value where the contract
// says (checked element by element), and the AVX kernel, where the tier
// allows it, does the same.
func TestTranspose8(t *testing.T) {
	const rows, blocks, lds, ldd = 8, 3, 29, 11
	src := make([]float32, rows*lds)
	for i := range src {
		src[i] = float32(i) + 0.5
	}
	kerns := map[string]func(src *float32, lds uintptr, dst *float32, ldd uintptr, blocks int){"go": transpose8Go}
	if avx := kernels[0].tr8; avx != nil {
		kerns[kernels[0].name] = avx
	}
	for name, tr := range kerns {
		dst := make([]float32, 8*blocks*ldd)
		tr(&src[0], lds*4, &dst[0], ldd*4, blocks)
		for i := 0; i < blocks; i++ {
			for r := 0; r < 8; r++ {
				for c := 0; c < 8; c++ {
					if got, want := dst[(8*i+c)*ldd+r], src[r*lds+8*i+c]; got != want {
						t.Fatalf("%s: block %d row %d col %d: %v, want %v", name, i, r, c, got, want)
					}
				}
			}
		}
	}
}
