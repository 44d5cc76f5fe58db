package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/r1go/r1go/internal/isa"
)

// The AMX path's driver (packing, blocks of 32, the ragged rest of B on
// the vector path, the transposed write of each block with alpha and
// beta) runs everywhere with amxRunGo as its kernel; the tile kernels
// themselves only where the CPU has AMX (a Sapphire Rapids or
// later Xeon, or Linux inside the Bochs emulator's sapphire_rapids model).

// withGoAMX turns the AMX path on with amxRunGo as its kernels for the
// rest of the test.
func withGoAMX(t *testing.T) {
	t.Helper()
	restore, ok := EmulateAMX()
	if !ok {
		t.Skip("no AVX512_BF16: the AMX path's driver rounds and packs with it")
	}
	t.Cleanup(restore)
}

// TestPackAMXLayout places every value of A where the tile unit reads it:
// row r, depth p lands in block r/32, half (r%32)/16, step p/32, tile row
// (p%32)/2, pair r%16, half p%2; padding rows are zero.
func TestPackAMXLayout(t *testing.T) {
	const rows, k = 37, 96
	r := rand.New(rand.NewPCG(5, 6))
	a := make([]uint16, 40*k) // padded to a multiple of 8 rows
	for i := range a[:rows*k] {
		a[i] = uint16(r.Uint32()) | 1 // never zero, so a missed value shows
	}
	dst := make([]uint16, 64*k)
	for i := range dst {
		dst[i] = 0xdead
	}
	packAMX(a, rows, k, dst)
	seen := make([]bool, len(dst))
	for row := 0; row < 64; row++ {
		for p := 0; p < k; p++ {
			at := (((row/32)*2+(row%32)/16)*(k/32)+p/32)*512 + ((p%32)/2)*32 + 2*(row%16) + p%2
			want := uint16(0)
			if row < rows {
				want = a[row*k+p]
			}
			if dst[at] != want {
				t.Fatalf("A[%d][%d] = %#x packed at %d as %#x", row, p, want, at, dst[at])
			}
			seen[at] = true
		}
	}
	for i, s := range seen {
		if !s {
			t.Fatalf("packed value %d belongs to no element of A", i)
		}
	}
}

// TestSgemmAMXDriver runs SgemmDotBF16TransB's AMX path with amxRunGo
// against the float64 product, with and without prefetching: B row counts
// below one block, at one, with ragged rests, of ten blocks (tasks of
// more than one) and of 130 (on 2 threads, 16 tasks of eight or nine
// blocks: runs of amxRunMax and of one); A row counts of one, a partial
// block, two blocks and more than one chunk of A (k 4,864: 32 rows a
// chunk, runs of one block); B's rows packed and with a pitch beyond k.
func TestSgemmAMXDriver(t *testing.T) {
	if !HasDotBF16() {
		t.Skip("no AVX512_BF16 (the path rounds A with it)")
	}
	withGoAMX(t)
	defer func() { amxPrefetch = true }()
	// With the next block passed for prefetching (past a task's last
	// block: none), and without.
	for _, prefetch := range []bool{true, false} {
		amxPrefetch = prefetch
		checkDotBF16(t, []dotCase{
			{1, 32, 32, 32, 32, 32}, {5, 37, 64, 70, 64, 40}, {32, 64, 96, 96, 100, 64},
			{33, 100, 128, 128, 128, 101}, {70, 8, 64, 64, 64, 8}, {40, 65, 4864, 4864, 4864, 65},
			{8, 320, 64, 64, 72, 320}, {3, 4160, 32, 32, 32, 4160},
		})
	}
}

// TestHasAMXFollowsTheCPU: the path is never on without AMX-BF16 or
// with R1GO_AMX=0, and off only with a reason.
func TestHasAMXFollowsTheCPU(t *testing.T) {
	on, why := HasAMX()
	if on && !(isa.X86.AMXTile && isa.X86.AMXBF16 && os.Getenv("R1GO_AMX") != "0") {
		t.Fatal("AMX path on without AMX-BF16 or with R1GO_AMX=0")
	}
	if !on && why == "" {
		t.Fatal("AMX path off without a reason")
	}
	t.Logf("AMX path on: %v %s", on, why)
}

// randNormals returns n standard normal values.
func randNormals(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// randAMXOperands returns n rows of B and 32 rows of A (bf16, k apart,
// random values of a decode product's magnitudes), and A packed by
// packAMX.
func randAMXOperands(seed uint64, n, k int) (b, a, act []uint16) {
	r := rand.New(rand.NewPCG(seed, 9))
	b = make([]uint16, n*k)
	a = make([]uint16, amxRows*k)
	for i := range b {
		b[i] = bf16Bits(float32(r.NormFloat64() * 0.1))
	}
	for i := range a {
		a[i] = bf16Bits(float32(r.NormFloat64()))
	}
	act = make([]uint16, amxRows*k)
	packAMX(a, amxRows, k, act)
	return b, a, act
}

// The benchmarks' other ways of running the tile unit (the driver's is B
// in place on the left, A packed on the right, Cᵀ's blocks written to a
// buffer and transposed into C):
//   - packed: B packed by packAMXB on the left, each tile's 1 KiB in one
//     piece, a block's tiles in the order the kernels read them, so that B
//     is one stream;
//   - direct: A in place on the left and B packed in pairs by packAMX on
//     the right, the tiles of sums stored straight into C (no transpose).

// amxPackedSide is where packAMXB puts B.
func amxPackedSide(k int) amxSide { return amxSide{32, 512, k / 32 * 512, 32 * k} }

// packAMXB writes the first n/32·32 rows of B (bf16, k values each, ldb
// apart; k a multiple of 32) into dst where amxPackedSide(k) says: for each
// block of 32 rows, its rows 0-15 then 16-31, each a run of k/32 tiles of
// 16 rows × 32 values. dst has n/32·32·k values.
func packAMXB(b []uint16, n, k, ldb int, dst []uint16) {
	k32 := k / 32
	for blk := 0; blk < n/amxRows; blk++ {
		for h := 0; h < 2; h++ {
			for st := 0; st < k32; st++ {
				tile := dst[((blk*2+h)*k32+st)*512:][:512]
				for rr := 0; rr < 16; rr++ {
					copy(tile[rr*32:][:32], b[(blk*amxRows+h*16+rr)*ldb+st*32:][:32])
				}
			}
		}
	}
}

// sgemmAMXPacked is sgemmAMX for B packed by packAMXB (n a multiple of 32).
func sgemmAMXPacked(m, n, k int, alpha float32, a16, bp []uint16, beta float32, c []float32, ldc int, threads int) {
	amxProduct(m, n, k, alpha, a16, bp, amxPackedSide(k), beta, c, ldc, threads)
}

// TestAMXRunLayouts: packAMXB puts every value of B where amxPackedSide
// says, and amxRunGo gives the same bits over B in place, over B packed,
// and the direct way (A on the left, B packed in pairs on the right, C
// written as it is).
func TestAMXRunLayouts(t *testing.T) {
	const n, k, nb = 96, 128, 3
	b, a, act := randAMXOperands(1, n, k)
	bp := make([]uint16, n*k)
	packAMXB(b, n, k, k, bp)
	ps := amxPackedSide(k)
	for row := 0; row < n; row++ {
		for p := 0; p < k; p++ {
			at := row/amxRows*ps.block + (row%amxRows)/16*ps.half + p/32*ps.step + row%16*ps.ld + p%32
			if bp[at] != b[row*k+p] {
				t.Fatalf("B[%d][%d] packed at %d as %#x, want %#x", row, p, at, bp[at], b[row*k+p])
			}
		}
	}
	want, got := make([]float32, nb*amxRows*amxRows), make([]float32, nb*amxRows*amxRows)
	amxRunGo(&amxRunArgs{nb: nb, k32: k / 32, l: b, ls: amxRowsSide(k), r: act, out: want, os: amxBlockSums})
	amxRunGo(&amxRunArgs{nb: nb, k32: k / 32, l: bp, ls: ps, r: act, out: got, os: amxBlockSums})
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("sum %d is %g over packed B, %g in place", i, got[i], want[i])
		}
	}
	bpairs := make([]uint16, n*k)
	packAMX(b, n, k, bpairs)
	c := make([]float32, amxRows*n)
	amxRunGo(&amxRunArgs{nb: nb, k32: k / 32, l: a, ls: amxSide{k, 32, 16 * k, 0}, r: bpairs, rblock: amxRows * k, out: c, os: amxDirectSums(n)})
	for q := 0; q < nb; q++ {
		for w := 0; w < amxRows; w++ {
			for x := 0; x < amxRows; x++ {
				if d, tr := c[x*n+q*amxRows+w], want[q*amxRows*amxRows+w*amxRows+x]; d != tr {
					t.Fatalf("C[%d][%d] is %g the direct way, %g transposed", x, q*amxRows+w, d, tr)
				}
			}
		}
	}
}

// TestAMXRunKernelsAgainstGo runs the tile run kernels (prefetching, not,
// and loading the next block with AVX-512 loads) on runs of one and three blocks of depth 896 (B in place with a
// pitch beyond k, packed, and the direct way) against amxRunGo: within
// 2⁻²⁰ of Σ|a·b|.
func TestAMXRunKernelsAgainstGo(t *testing.T) {
	if on, why := HasAMX(); !on {
		if os.Getenv("R1GO_AMX_REQUIRE") == "1" {
			t.Fatal("AMX path off:", why)
		}
		t.Skip("AMX path off:", why)
	}
	const n, k, ldb = 96, 896, 928
	b, a, _ := randAMXOperands(2, n, ldb) // rows ldb apart, of which the first k count
	compact := func(m []uint16, rows int) []uint16 {
		c := make([]uint16, rows*k)
		for i := range rows {
			copy(c[i*k:][:k], m[i*ldb:][:k])
		}
		return c
	}
	act, bp, bpairs := make([]uint16, amxRows*k), make([]uint16, n*k), make([]uint16, n*k)
	packAMX(compact(a, amxRows), amxRows, k, act)
	packAMXB(b, n, k, ldb, bp)
	packAMX(compact(b, n), n, k, bpairs)
	wide := func(h uint16) float64 { return float64(math.Float32frombits(uint32(h) << 16)) }
	for _, nb := range []int{1, 3} {
		for _, c := range []struct {
			name string
			call amxRunArgs
			at   func(w, x int) int // where the sum of B's row w and A's row x is
		}{
			{"rows", amxRunArgs{l: b, ls: amxRowsSide(ldb), r: act, os: amxBlockSums, pf: b, last: b, pfstride: amxRows * ldb},
				func(w, x int) int { return w*amxRows + x }},
			{"packed", amxRunArgs{l: bp, ls: amxPackedSide(k), r: act, os: amxBlockSums, pf: bp, last: bp, pfstride: amxRows * k},
				func(w, x int) int { return w*amxRows + x }},
			// A on the left (32 rows in place, ldb apart), B's pairs on the
			// right, C (32 × n) written in place.
			{"direct", amxRunArgs{l: a, ls: amxSide{ldb, 32, 16 * ldb, 0}, r: bpairs, rblock: amxRows * k,
				os: amxDirectSums(n), pf: bpairs, last: bpairs, pfstride: amxRows * k},
				func(w, x int) int { return x*n + w }},
		} {
			c.call.nb, c.call.k32 = nb, k/32
			want := make([]float32, amxRows*n)
			c.call.out = want
			amxRunGo(&c.call)
			for _, kern := range []string{"prefetch", "nopf", "avx"} {
				prefetch := kern != "nopf"
				got := make([]float32, amxRows*n)
				c.call.out = got
				if kern == "avx" {
					amxRunWith(amxRunBF16AVX, true)(&c.call)
				} else {
					amxRunAsm(prefetch)(&c.call)
				}
				for w := 0; w < nb*amxRows; w++ {
					for x := 0; x < amxRows; x++ {
						var mag float64
						for p := 0; p < k; p++ {
							mag += math.Abs(wide(b[w*ldb+p]) * wide(a[x*ldb+p]))
						}
						at := c.at(w, x)
						if d := math.Abs(float64(got[at] - want[at])); d > mag*math.Pow(2, -20) {
							t.Fatalf("%s nb %d kernel %s: the sum of B's row %d and A's row %d is %g, amxRunGo %g", c.name, nb, kern, w, x, got[at], want[at])
						}
					}
				}
				for w := nb * amxRows; w < n; w++ { // past the run: untouched
					for x := 0; x < amxRows; x++ {
						if got[c.at(w, x)] != 0 {
							t.Fatalf("%s nb %d: the sum of B's row %d and A's row %d is outside the run but was written", c.name, nb, w, x)
						}
					}
				}
			}
		}
	}
}

// TestSgemmAMXPacked: the product over B packed by packAMXB, and the
// direct way's (alpha 1, beta 0, 32 rows of A), equal, bit for bit, the
// product over B in place (same kernel arithmetic, same order of sums),
// the first with alpha and beta, for A of one row, a partial block and
// two chunks; the direct way over 40 blocks of B (tasks of two and three
// blocks on 2 threads: runs of more than one, each block its own part of
// B and of C).
func TestSgemmAMXPacked(t *testing.T) {
	if !HasDotBF16() {
		t.Skip("no AVX512_BF16 (the path rounds A with it)")
	}
	withGoAMX(t)
	for _, c := range []struct{ m, n, k int }{{1, 64, 64}, {20, 320, 96}, {40, 64, 4864}, {32, 1280, 896}} {
		b, _, _ := randAMXOperands(3, c.n, c.k)
		bp := make([]uint16, c.n*c.k)
		packAMXB(b, c.n, c.k, c.k, bp)
		r := rand.New(rand.NewPCG(4, 5))
		a, c0 := randNormals(r, c.m*c.k), randNormals(r, c.m*c.n)
		want := append([]float32(nil), c0...)
		SgemmDotBF16TransB(c.m, c.n, c.k, 0.5, a, c.k, b, c.k, 0.25, want, c.n, 2)
		got := append([]float32(nil), c0...)
		sa := roundRowsBF16(c.m, c.k, a, c.k, 8, 2)
		sgemmAMXPacked(c.m, c.n, c.k, 0.5, *sa, bp, 0.25, got, c.n, 2)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%+v: C[%d] = %g over packed B, %g in place", c, i, got[i], want[i])
			}
		}
		if c.m == amxRows {
			SgemmDotBF16TransB(c.m, c.n, c.k, 1, a, c.k, b, c.k, 0, want, c.n, 2)
			bt := append([]uint16(nil), b...)
			PackTileBF16(bt, c.n, c.k, 2)
			SgemmTileBF16TransB(c.m, c.n, c.k, 1, a, c.k, bt, 0, got, c.n, 2)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%+v: C[%d] = %g the direct way, %g in place", c, i, got[i], want[i])
				}
			}
		}
		putDotScratch(sa)
	}
}

// BenchmarkAMXRun times the tile run kernels alone on operands in cache,
// prefetching and not ("-nopf"): B in place ("rows"), B packed by packAMXB
// ("packed"), and the direct way ("direct": A in place, B in pairs, C
// written as it is). k = 256, one block: everything in L1; 896, four
// blocks, and 4,864, two: in L2. The kernels take turns, each a
// millisecond or so a turn, and each reports its best turn: on a shared
// machine whose speed drifts within seconds, the ratios of one run are
// what to read. Set beside the tile unit's 1,024 flops a cycle they say
// what the tile loads cost.
func BenchmarkAMXRun(b *testing.B) {
	if on, why := HasAMX(); !on {
		b.Skip("AMX path off:", why)
	}
	for _, s := range []struct{ k, nb int }{{256, 1}, {896, 4}, {4864, 2}} {
		n := s.nb * amxRows
		bw, a, act := randAMXOperands(5, n, s.k)
		bp, bpairs := make([]uint16, n*s.k), make([]uint16, n*s.k)
		packAMXB(bw, n, s.k, s.k, bp)
		packAMX(bw, n, s.k, bpairs)
		out := make([]float32, s.nb*amxRows*amxRows)
		flops := 2 * float64(n*amxRows*s.k)
		reps := max(1, int(2e8/flops)) // a turn: about a millisecond
		type variant struct {
			name string
			run  func()
		}
		var vs []variant
		for _, c := range []struct {
			name string
			call amxRunArgs
		}{
			{"rows", amxRunArgs{l: bw, ls: amxRowsSide(s.k), r: act, os: amxBlockSums, pfstride: amxRows * s.k}},
			{"packed", amxRunArgs{l: bp, ls: amxPackedSide(s.k), r: act, os: amxBlockSums, pfstride: amxRows * s.k}},
			{"direct", amxRunArgs{l: a, ls: amxSide{s.k, 32, 16 * s.k, 0}, r: bpairs, rblock: amxRows * s.k, os: amxDirectSums(n), pfstride: amxRows * s.k}},
		} {
			c.call.nb, c.call.k32, c.call.out = s.nb, s.k/32, out
			c.call.pf, c.call.last = c.call.l, c.call.l
			if c.name == "direct" {
				c.call.pf, c.call.last = bpairs, bpairs
			}
			for _, prefetch := range []bool{true, false} {
				kern, name, call := amxRunAsm(prefetch), c.name, c.call
				if !prefetch {
					name += "-nopf"
				}
				vs = append(vs, variant{name, func() { kern(&call) }})
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
