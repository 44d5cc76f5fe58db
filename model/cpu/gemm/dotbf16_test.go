package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/r1go/r1go/internal/pool"
)

// roundBF16 is float32 → bf16 → float32, to nearest even (denormals
// flushed to zero and NaNs truncated and quieted, as AVX512_BF16's
// conversion does).
func roundBF16(f float32) float32 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return math.Float32frombits((b | 0x00400000) &^ 0xffff)
	}
	if b&0x7f800000 == 0 {
		return math.Float32frombits(b & 0x80000000)
	}
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}

// TestCvtBF16 checks the conversion kernel against roundBF16 on random
// values over many binades, ties and denormals.
func TestCvtBF16(t *testing.T) {
	if !HasDotBF16() {
		t.Skip("no AVX512_BF16")
	}
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]float32, 32*512)
	for i := range src {
		switch i % 4 {
		case 0:
			src[i] = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(60)-30)))
		case 1: // exact ties between two bf16 values
			src[i] = math.Float32frombits(r.Uint32()&^0xffff | 0x8000)
		case 2:
			src[i] = math.Float32frombits(r.Uint32() & 0x807fffff) // denormal
		default:
			src[i] = math.Float32frombits(r.Uint32()&0x3fffffff | 0x3f000000)
		}
	}
	dst := make([]uint16, len(src))
	cvtBF16(len(src)/32, &src[0], &dst[0])
	for i, f := range src {
		want := math.Float32bits(roundBF16(f)) >> 16
		if uint32(dst[i]) != want {
			t.Fatalf("src[%d] = %g (%#08x): bf16 %#04x, want %#04x", i, f, math.Float32bits(f), dst[i], want)
		}
	}
}

// TestSgemmDotBF16AgainstFloat64 compares the dot path with a float64
// product of A rounded to bf16 and the bf16 B, for row counts around the
// tile kernel's tile of 4 (decode batches 1-33) and the broadcast
// kernels' blocks of 16 and 32 rows (13-16, 25-32, two blocks up to 64;
// panels.go), B row counts with and without a ragged last tile or panel,
// alpha and beta: within float32 summation error (2⁻²⁰ of Σ|a·b|; the tile
// kernel's sum has k/32 + 4 roundings per lane chain, the broadcast
// kernels' k/2). A k that is not a multiple of 32 is declined. On a CPU
// with AMX the products run on the tile unit (amx.go) and must meet the
// same bound.
func TestSgemmDotBF16AgainstFloat64(t *testing.T) {
	if !HasDotBF16() {
		t.Skip("no AVX512_BF16")
	}
	checkDotBF16(t, []dotCase{
		{1, 8, 32, 32, 32, 8}, {3, 7, 64, 70, 64, 9}, {4, 16, 896, 896, 896, 16}, {5, 13, 96, 96, 100, 13},
		{32, 130, 896, 896, 896, 130}, {33, 6, 4864 / 8, 4864 / 8, 4864 / 8, 6}, {17, 1152 / 8, 256, 300, 256, 200},
		{13, 8, 64, 64, 64, 8}, {16, 21, 96, 100, 98, 30}, {29, 205, 256, 256, 260, 205}, {31, 3, 32, 40, 32, 3},
		{45, 64, 128, 128, 128, 64}, {61, 77, 64, 70, 64, 80}, {64, 16, 4864, 4864, 4864, 16},
	})
	// Both kernels on every shape their row counts allow.
	defer func() { dotForce = "" }()
	for _, force := range []string{"panels", "tiles"} {
		dotForce = force
		checkDotBF16(t, []dotCase{{1, 9, 32, 32, 32, 9}, {9, 16, 64, 64, 64, 16}, {20, 11, 96, 96, 96, 11}, {40, 70, 64, 64, 64, 70}})
	}
	dotForce = ""
	for _, m := range []int{12, 13, 16, 17, 24, 25, 32, 33, 44, 45, 48, 56, 57, 64, 65} {
		last := (m-1)%32 + 1
		if got, want := usePanels(m), m <= 64 && (last >= 13 && last <= 16 || last >= 25); got != want {
			t.Errorf("usePanels(%d) = %v", m, got)
		}
	}
	if SgemmDotBF16TransB(2, 2, 48, 1, make([]float32, 96), 48, make([]uint16, 96), 48, 0, make([]float32, 4), 2, 1) {
		t.Error("k = 48 was taken")
	}
}

// dotCase is a product's shape and row pitches.
type dotCase struct{ m, n, k, lda, ldb, ldc int }

// checkDotBF16 runs SgemmDotBF16TransB on random operands of each shape
// with three alpha, beta pairs and compares C with a float64 product of A
// rounded to bf16 and B, within 2⁻²⁰ of Σ|a·b|; the columns of C between
// n and ldc must stay untouched.
func checkDotBF16(t *testing.T, cases []dotCase) {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range cases {
		for _, ab := range [][2]float32{{1, 0}, {0.5, 1}, {-1, 0.25}} {
			alpha, beta := ab[0], ab[1]
			a := make([]float32, (c.m-1)*c.lda+c.k)
			for i := range a {
				a[i] = float32(r.NormFloat64())
			}
			b := make([]uint16, (c.n-1)*c.ldb+c.k)
			for i := range b {
				b[i] = uint16(math.Float32bits(float32(r.NormFloat64()*0.1)) >> 16)
			}
			cc := make([]float32, (c.m-1)*c.ldc+c.n)
			for i := range cc {
				cc[i] = float32(r.NormFloat64())
			}
			want := append([]float32(nil), cc...)
			if !SgemmDotBF16TransB(c.m, c.n, c.k, alpha, a, c.lda, b, c.ldb, beta, cc, c.ldc, 2) {
				t.Fatalf("%+v: declined", c)
			}
			for i := 0; i < c.m; i++ {
				for j := 0; j < c.n; j++ {
					var s, mag float64
					for p := 0; p < c.k; p++ {
						x := float64(roundBF16(a[i*c.lda+p])) * float64(math.Float32frombits(uint32(b[j*c.ldb+p])<<16))
						s, mag = s+x, mag+math.Abs(x)
					}
					s = float64(alpha)*s + float64(beta)*float64(want[i*c.ldc+j])
					mag = math.Abs(float64(alpha))*mag + math.Abs(float64(beta)*float64(want[i*c.ldc+j]))
					if got := float64(cc[i*c.ldc+j]); math.Abs(got-s) > mag*math.Pow(2, -20)+1e-30 {
						t.Fatalf("%+v alpha %g beta %g: C[%d][%d] = %g, want %g (Σ|a·b| %g)", c, alpha, beta, i, j, got, s, mag)
					}
				}
			}
			// Padding columns of C (between n and ldc) stay untouched.
			for i := 0; i < c.m-1; i++ {
				for j := c.n; j < c.ldc; j++ {
					if cc[i*c.ldc+j] != want[i*c.ldc+j] {
						t.Fatalf("%+v: C[%d][%d] outside the product was written", c, i, j)
					}
				}
			}
		}
	}
}

// TestPackPairs checks the pair layout from the block transpose against
// the pairs read element by element, for row counts that fill one to four
// groups of eight and both lane widths.
func TestPackPairs(t *testing.T) {
	if !HasDotBF16() {
		t.Skip("no AVX512_BF16: the broadcast path is never taken")
	}
	const k = 96
	a16 := make([]uint16, 32*k)
	for i := range a16 {
		a16[i] = uint16(i*7919 + 3)
	}
	for _, lanes := range []int{16, 32} {
		for rows := 1; rows <= lanes; rows++ {
			src := append([]uint16(nil), a16...)
			clear(src[rows*k:]) // the padding rows are zero
			got := make([]uint16, k*lanes)
			for i := range got {
				got[i] = 0xdead // every element must be written
			}
			packPairs(src, k, rows, lanes, got)
			for p := 0; p < k/2; p++ {
				for i := 0; i < lanes; i++ {
					var w0, w1 uint16
					if i < rows {
						w0, w1 = src[i*k+2*p], src[i*k+2*p+1]
					}
					if g0, g1 := got[2*(p*lanes+i)], got[2*(p*lanes+i)+1]; g0 != w0 || g1 != w1 {
						t.Fatalf("lanes %d rows %d: pair %d of row %d is %#x %#x, want %#x %#x", lanes, rows, p, i, g0, g1, w0, w1)
					}
				}
			}
		}
	}
}

// BenchmarkDotBF16 times a batch-32 decode product (32 × 4,864 by 896,
// Qwen2.5-0.5B's gate/up rows) on the bf16 dot path against the float32
// path on the widened weights, one thread each, in the same run.
func BenchmarkDotBF16(b *testing.B) {
	if !HasDotBF16() {
		b.Skip("no AVX512_BF16")
	}
	const m, n, k = 32, 9728, 896
	a := make([]float32, m*k)
	w16 := make([]uint16, n*k)
	w32 := make([]float32, n*k)
	for i := range w16 {
		w16[i] = uint16(0x3c00 + i%97)
		w32[i] = math.Float32frombits(uint32(w16[i]) << 16)
	}
	for i := range a {
		a[i] = float32(i%13) * 0.1
	}
	c := make([]float32, m*n)
	e, _ := NewEngine("", 1)
	b.Run("dot-bf16", func(b *testing.B) {
		for b.Loop() {
			SgemmDotBF16TransB(m, n, k, 1, a, k, w16, k, 0, c, n, 1)
		}
		b.ReportMetric(2*m*n*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("float32", func(b *testing.B) {
		for b.Loop() {
			e.Sgemm(false, true, m, n, k, 1, a, k, w32, k, 0, c, n)
		}
		b.ReportMetric(2*m*n*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}

// bf16Kernels names the bf16 product's kernels on this CPU for
// useBF16Kernel: the vector kernels, and where AMX is on the tile unit
// with and without its prefetch of the next block (amxPrefetch).
func bf16Kernels() []string {
	k := []string{"panels", "tiles"}
	if on, _ := HasAMX(); on {
		k = append(k, "amx", "amx-noprefetch")
	}
	return k
}

// useBF16Kernel sends the bf16 products to the named kernel and returns
// the function that puts the choice back.
func useBF16Kernel(kern string) (undo func()) {
	switch kern {
	case "amx":
	case "amx-noprefetch":
		amxPrefetch = false
	default:
		dotForce = kern
	}
	return func() { dotForce, amxPrefetch = "", true }
}

// BenchmarkDotBF16Rows times the bf16 dot path's kernels (bf16Kernels) on
// Qwen2.5-0.5B's gate-up (9,728 × 896) and down (896 × 4,864) weights for
// decode batches of 8 to 64 rows, on every thread: the figures behind
// usePanels. The weights (17 and 9 MB) stay in a large L3 from one
// product to the next; BenchmarkDotBF16Stream reads them from memory.
func BenchmarkDotBF16Rows(b *testing.B) {
	if !HasDotBF16() {
		b.Skip("no AVX512_BF16")
	}
	for _, w := range []struct {
		name string
		n, k int
	}{{"gate-up", 9728, 896}, {"down", 896, 4864}} {
		b16 := make([]uint16, w.n*w.k)
		for i := range b16 {
			b16[i] = uint16(0x3c00 + i%97)
		}
		for _, m := range []int{8, 12, 16, 20, 24, 28, 32, 48, 64} {
			a := make([]float32, m*w.k)
			for i := range a {
				a[i] = float32(i%13) * 0.1
			}
			c := make([]float32, m*w.n)
			for _, kern := range bf16Kernels() {
				b.Run(fmt.Sprintf("%s/m%d/%s", w.name, m, kern), func(b *testing.B) {
					defer useBF16Kernel(kern)()
					for b.Loop() {
						SgemmDotBF16TransB(m, w.n, w.k, 1, a, w.k, b16, w.k, 0, c, w.n, 0)
					}
					b.ReportMetric(2*float64(m*w.n*w.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkDotBF16Stream times a batch-32 decode's products as a step
// reads them, from memory: 0.9 GB of bf16 weights (three times the GPU
// machine's 300 MB of L3), 24 layers' gate-up and down matrices of
// Qwen2.5-0.5B and its 151,936-row LM head, with every kernel of
// bf16Kernels on every thread (and on AMX, B packed by packAMXB, one stream
// a block, and the direct way, C written from the tiles without a
// transpose), in GB/s of weights read (the figure to set beside the read
// bandwidth). The kernels take turns, a pass each, and each reports its
// best pass: the GPU machine's bandwidth drifts by a third within a call.
func BenchmarkDotBF16Stream(b *testing.B) {
	if !HasDotBF16() {
		b.Skip("no AVX512_BF16")
	}
	const m, layers = 32, 24
	type mat struct {
		w, packed, pairs []uint16
		n, k             int
	}
	var mats []mat
	bytes := 0
	add := func(n, k int) {
		w := make([]uint16, n*k)
		for i := range w {
			w[i] = uint16(0x3c00 + i%97)
		}
		mats = append(mats, mat{w: w, n: n, k: k})
		bytes += 2 * n * k
	}
	for range layers {
		add(9728, 896)
		add(896, 4864)
	}
	add(151936, 896)
	a := make([]float32, m*4864)
	for i := range a {
		a[i] = float32(i%13) * 0.1
	}
	c := make([]float32, m*151936)
	type variant struct {
		name string
		pass func()
	}
	var vs []variant
	for _, kern := range bf16Kernels() {
		vs = append(vs, variant{kern, func() {
			defer useBF16Kernel(kern)()
			for _, w := range mats {
				SgemmDotBF16TransB(m, w.n, w.k, 1, a, w.k, w.w, w.k, 0, c, w.n, 0)
			}
		}})
	}
	if on, _ := HasAMX(); on {
		// B packed by packAMXB, each block one stream, and in pairs for
		// the direct way (the packing untimed; amx_test.go).
		for i, w := range mats {
			mats[i].packed, mats[i].pairs = make([]uint16, len(w.w)), make([]uint16, len(w.w))
			packAMXB(w.w, w.n, w.k, w.k, mats[i].packed)
			copy(mats[i].pairs, w.w)
			PackTileBF16(mats[i].pairs, w.n, w.k, 0)
		}
		for _, prefetch := range []bool{true, false} {
			name := "amx-packed"
			if !prefetch {
				name += "-noprefetch"
			}
			vs = append(vs, variant{name, func() {
				defer func(p bool) { amxPrefetch = p }(amxPrefetch)
				amxPrefetch = prefetch
				threads := runtime.GOMAXPROCS(0)
				for _, w := range mats {
					sa := roundRowsBF16(m, w.k, a, w.k, 8, threads)
					sgemmAMXPacked(m, w.n, w.k, 1, *sa, w.packed, 0, c, w.n, threads)
					putDotScratch(sa)
				}
			}})
			vs = append(vs, variant{"amx-direct" + name[len("amx-packed"):], func() {
				defer func(p bool) { amxPrefetch = p }(amxPrefetch)
				amxPrefetch = prefetch
				threads := runtime.GOMAXPROCS(0)
				for _, w := range mats {
					SgemmTileBF16TransB(m, w.n, w.k, 1, a, w.k, w.pairs, 0, c, w.n, threads)
				}
			}})
		}
	}
	best := make([]time.Duration, len(vs))
	for b.Loop() {
		for i, v := range vs {
			t0 := time.Now()
			v.pass()
			if d := time.Since(t0); best[i] == 0 || d < best[i] {
				best[i] = d
			}
		}
	}
	for i, v := range vs {
		b.ReportMetric(float64(bytes)/best[i].Seconds()/1e9, v.name+"-GB/s")
	}
}

// BenchmarkDotBF16Threads times a decode batch's bf16 product (32 rows,
// depth 896) against 512, 2,048 and 9,728 rows of B on one thread and on
// GOMAXPROCS, with the pool's helpers (awake between calls) and with fresh
// goroutines each call (pool.Fresh, as before), in the same run: the
// smaller the product, the more a helper's start costs.
func BenchmarkDotBF16Threads(b *testing.B) {
	const m, k = 32, 896
	threads := runtime.GOMAXPROCS(0)
	for _, n := range []int{512, 2048, 9728} {
		b16 := make([]uint16, n*k)
		for i := range b16 {
			b16[i] = uint16(0x3c00 + i%97)
		}
		a := make([]float32, m*k)
		for i := range a {
			a[i] = float32(i%13) * 0.1
		}
		c := make([]float32, m*n)
		for _, v := range []struct {
			name    string
			threads int
			fresh   bool
		}{{"1-thread", 1, false}, {"pool", threads, false}, {"fresh-goroutines", threads, true}} {
			b.Run(fmt.Sprintf("n%d/%s", n, v.name), func(b *testing.B) {
				pool.Fresh = v.fresh
				defer func() { pool.Fresh = false }()
				for b.Loop() {
					SgemmDotBF16TransB(m, n, k, 1, a, k, b16, k, 0, c, n, v.threads)
				}
				b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// guidedTasks covers [0, n) in tasks that start at 0, end at n, each a
// 1/(2·threads) share of what is left or minUnits, whichever is more (the
// last: what remains), so never longer than the one before it.
func TestGuidedTasks(t *testing.T) {
	for _, n := range []int{0, 1, 7, 112, 144, 1216, 18992} {
		for _, threads := range []int{1, 2, 16} {
			for _, minUnits := range []int{1, 3, 18} {
				s := guidedTasks(n, threads, minUnits)
				what := fmt.Sprintf("n %d, %d threads, at least %d", n, threads, minUnits)
				if s[0] != 0 || s[len(s)-1] != n {
					t.Fatalf("%s: starts %v", what, s)
				}
				for i := 1; i < len(s); i++ {
					size, left := s[i]-s[i-1], n-s[i-1]
					if want := min(left, max(minUnits, (left+2*threads-1)/(2*threads))); size != want {
						t.Fatalf("%s: task %d of %d units, want %d (%d left)", what, i-1, size, want, left)
					}
					if i > 1 && size > s[i-1]-s[i-2] {
						t.Fatalf("%s: task %d longer than the one before it: %v", what, i-1, s)
					}
				}
			}
		}
	}
}

// A decode batch's product on the broadcast panels gives the same bits on
// 1, 2 and 3 threads: each panel's sums do not depend on the task that
// computes them.
func TestDotPanelsSameBitsAnyThreads(t *testing.T) {
	if !HasDotBF16() {
		t.Skip("no AVX512_BF16")
	}
	defer func() { dotForce = "" }()
	dotForce = "panels"
	const m, n, k = 32, 8*700 + 5, 128
	r := rand.New(rand.NewPCG(9, 10))
	a := make([]float32, m*k)
	for i := range a {
		a[i] = float32(r.NormFloat64())
	}
	b := make([]uint16, n*k)
	for i := range b {
		b[i] = uint16(math.Float32bits(float32(r.NormFloat64()*0.1)) >> 16)
	}
	var want []float32
	for threads := 1; threads <= 3; threads++ {
		c := make([]float32, m*n)
		if !SgemmDotBF16TransB(m, n, k, 1, a, k, b, k, 0, c, n, threads) {
			t.Fatal("declined")
		}
		if want == nil {
			want = c
			continue
		}
		for i := range c {
			if math.Float32bits(c[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%d threads: C[%d] = %g, on one thread %g", threads, i, c[i], want[i])
			}
		}
	}
}
