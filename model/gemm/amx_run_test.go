package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// withGoAMXRun turns the AMX path on in driver mode mode with amxRunGo as
// both run kernels for the rest of the test.
func withGoAMXRun(t *testing.T, mode string) {
	t.Helper()
	withGoAMX(t)
	kerns, old := amxRunKern, amxMode
	amxRunKern = map[string]amxRunKernel{}
	for _, m := range amxRunModes {
		amxRunKern[m] = amxRunGo
	}
	amxMode = mode
	t.Cleanup(func() { amxRunKern, amxMode = kerns, old })
}

// randAMXOperands returns n rows of B (k apart) and 32 rows of A packed by
// packAMX, random bf16 values of a decode product's magnitudes.
func randAMXOperands(seed uint64, n, k int) (b, act []uint16) {
	r := rand.New(rand.NewPCG(seed, 9))
	b = make([]uint16, n*k)
	a := make([]uint16, amxRows*k)
	for i := range b {
		b[i] = bf16Bits(float32(r.NormFloat64() * 0.1))
	}
	for i := range a {
		a[i] = bf16Bits(float32(r.NormFloat64()))
	}
	act = make([]uint16, amxRows*k)
	packAMX(a, amxRows, k, act)
	return b, act
}

// TestAMXRunLayouts: amxRunGo over B in place and over B packed by
// packAMXB gives, block by block, amxBlockGo's bits, and packAMXB puts
// every value of B where amxPackedLayout says.
func TestAMXRunLayouts(t *testing.T) {
	const n, k, nb = 96, 128, 3
	b, act := randAMXOperands(1, n, k)
	bp := make([]uint16, n*k)
	packAMXB(b, n, k, k, bp)
	lay := amxPackedLayout(k)
	for row := 0; row < n; row++ {
		for p := 0; p < k; p++ {
			at := row/amxRows*lay.block + (row%amxRows)/16*lay.half + p/32*lay.step + row%16*lay.ld + p%32
			if bp[at] != b[row*k+p] {
				t.Fatalf("B[%d][%d] packed at %d as %#x, want %#x", row, p, at, bp[at], b[row*k+p])
			}
		}
	}
	want := make([]float32, nb*amxRows*amxRows)
	for q := 0; q < nb; q++ {
		amxBlockGo(k/32, b[q*amxRows*k:], k, act, want[q*amxRows*amxRows:], nil)
	}
	for _, c := range []struct {
		name string
		b    []uint16
		lay  amxLayout
	}{{"rows", b, amxRowsLayout(k)}, {"packed", bp, lay}} {
		got := make([]float32, len(want))
		amxRunGo(nb, k/32, c.b, c.lay, act, got, nil)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: sum %d is %g, amxBlockGo %g", c.name, i, got[i], want[i])
			}
		}
	}
}

// TestAMXRunKernelsAgainstGo runs the tile run kernels (every prefetch
// mode) on runs of one and three blocks of depth 896, B in
// place (pitch beyond k) and packed, against amxRunGo: within 2⁻²⁰ of
// Σ|a·b|.
func TestAMXRunKernelsAgainstGo(t *testing.T) {
	if on, why := HasAMX(); !on {
		if os.Getenv("R1GO_AMX_REQUIRE") == "1" {
			t.Fatal("AMX path off:", why)
		}
		t.Skip("AMX path off:", why)
	}
	const n, k, ldb = 96, 896, 928
	b, act := randAMXOperands(2, n, ldb)
	bp := make([]uint16, n*k)
	packAMXB(b, n, k, ldb, bp)
	for _, nb := range []int{1, 3} {
		for _, c := range []struct {
			name string
			b    []uint16
			lay  amxLayout
		}{{"rows", b, amxRowsLayout(ldb)}, {"packed", bp, amxPackedLayout(k)}} {
			want := make([]float32, nb*amxRows*amxRows)
			amxRunGo(nb, k/32, c.b, c.lay, act, want, nil)
			for _, mode := range amxRunModes {
				got := make([]float32, len(want))
				amxRunAsm(mode)(nb, k/32, c.b, c.lay, act, got, c.b)
				for i := range got {
					q, r, col := i/(amxRows*amxRows), i/amxRows%amxRows, i%amxRows
					var mag float64
					for p := 0; p < k; p++ {
						row := c.b[q*c.lay.block+r/16*c.lay.half+p/32*c.lay.step+r%16*c.lay.ld+p%32]
						tile := act[(col/16*(k/32)+p/32)*512+(p%32)/2*32+2*(col%16)+p%2]
						mag += math.Abs(float64(math.Float32frombits(uint32(row)<<16)) * float64(math.Float32frombits(uint32(tile)<<16)))
					}
					if d := math.Abs(float64(got[i] - want[i])); d > mag*math.Pow(2, -20) {
						t.Fatalf("%s nb %d %s: sum %d is %g, amxRunGo %g (Σ|a·b| %g)", c.name, nb, mode, i, got[i], want[i], mag)
					}
				}
			}
		}
	}
}

// TestSgemmAMXRunDriver runs SgemmDotBF16TransB's AMX path in the run
// modes (runs of blocks, amxRunGo as the kernel) against float64, on the
// shapes of TestSgemmAMXDriver, with and without prefetching: tasks of
// more than amxRunMax blocks, ragged rests and A in several chunks.
func TestSgemmAMXRunDriver(t *testing.T) {
	if !HasDotBF16() {
		t.Skip("no AVX512_BF16 (the path rounds A with it)")
	}
	defer func() { amxPrefetch = true }()
	for _, mode := range amxRunModes {
		withGoAMXRun(t, mode)
		for _, prefetch := range []bool{true, false} {
			amxPrefetch = prefetch
			checkDotBF16(t, []dotCase{
				{1, 32, 32, 32, 32, 32}, {5, 37, 64, 70, 64, 40}, {32, 64, 96, 96, 100, 64},
				{33, 100, 128, 128, 128, 101}, {40, 65, 4864, 4864, 4864, 65},
				{8, 320, 64, 64, 72, 320}, {3, 640, 32, 32, 32, 640},
			})
		}
	}
}

// TestSgemmAMXPacked: the product over B packed by packAMXB equals, bit for
// bit, the product over B in place (same kernel, same order of sums), with
// alpha and beta, for A of one row, a partial block and two chunks.
func TestSgemmAMXPacked(t *testing.T) {
	if !HasDotBF16() {
		t.Skip("no AVX512_BF16 (the path rounds A with it)")
	}
	withGoAMXRun(t, "run")
	for _, c := range []struct{ m, n, k int }{{1, 64, 64}, {20, 320, 96}, {40, 64, 4864}} {
		b, _ := randAMXOperands(3, c.n, c.k)
		bp := make([]uint16, c.n*c.k)
		packAMXB(b, c.n, c.k, c.k, bp)
		r := rand.New(rand.NewPCG(4, 5))
		a := make([]float32, c.m*c.k)
		for i := range a {
			a[i] = float32(r.NormFloat64())
		}
		c0 := make([]float32, c.m*c.n)
		for i := range c0 {
			c0[i] = float32(r.NormFloat64())
		}
		want := append([]float32(nil), c0...)
		SgemmDotBF16TransB(c.m, c.n, c.k, 0.5, a, c.k, b, c.k, 0.25, want, c.n, 2)
		got := append([]float32(nil), c0...)
		sa := roundRowsBF16(c.m, c.k, a, c.k, 2)
		sgemmAMXPacked(c.m, c.n, c.k, 0.5, *sa, bp, 0.25, got, c.n, 2, "run")
		putDotScratch(sa)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%+v: C[%d] = %g over packed B, %g in place", c, i, got[i], want[i])
			}
		}
	}
}

// BenchmarkAMXRun times the tile kernels alone on operands in cache: the
// block kernel a call a block ("block"), and the run kernels (every mode)
// over B in place ("rows") and packed ("packed"). k = 256, one block:
// everything in L1; 896, four blocks, and 4,864, two: in L2. The kernels
// take turns, each a millisecond or so a turn, and each reports its best
// turn: on a shared machine whose speed drifts within seconds, the ratios
// of one run are what to read. Set beside the tile unit's 1,024 flops a
// cycle they say what the tile loads cost.
func BenchmarkAMXRun(b *testing.B) {
	if on, why := HasAMX(); !on {
		b.Skip("AMX path off:", why)
	}
	for _, s := range []struct{ k, nb int }{{256, 1}, {896, 4}, {4864, 2}} {
		n := s.nb * amxRows
		bw, act := randAMXOperands(5, n, s.k)
		bp := make([]uint16, n*s.k)
		packAMXB(bw, n, s.k, s.k, bp)
		out := make([]float32, s.nb*amxRows*amxRows)
		flops := 2 * float64(n*amxRows*s.k)
		reps := max(1, int(2e8/flops)) // a turn: about a millisecond
		type variant struct {
			name string
			run  func()
		}
		vs := []variant{{"block", func() {
			for q := 0; q < s.nb; q++ {
				amxAsm(s.k/32, bw[q*amxRows*s.k:], s.k, act, out[q*amxRows*amxRows:], nil)
			}
		}}}
		for _, lay := range []struct {
			name string
			b    []uint16
			lay  amxLayout
		}{{"rows", bw, amxRowsLayout(s.k)}, {"packed", bp, amxPackedLayout(s.k)}} {
			for _, mode := range amxRunModes {
				kern := amxRunAsm(mode)
				vs = append(vs, variant{lay.name + mode[len("run"):], func() { kern(s.nb, s.k/32, lay.b, lay.lay, act, out, lay.b) }})
			}
		}
		b.Run(fmt.Sprintf("k%d", s.k), func(b *testing.B) {
			best := make([]time.Duration, len(vs))
			for b.Loop() {
				for i, v := range vs {
					t0 := time.Now()
					for range reps {
						v.run()
					}
					if d := time.Since(t0); best[i] == 0 || d < best[i] {
						best[i] = d
					}
				}
			}
			for i, v := range vs {
				b.ReportMetric(flops*float64(reps)/best[i].Seconds()/1e9, v.name+"-GFLOP/s")
			}
		})
	}
}
