package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/r1go/r1go/internal/pages"
)

// TestPackTileBF16Layout: PackTileBF16 puts every value of the full
// blocks where packAMX does (the run kernels' right operand), leaves the
// ragged last rows as they were, and TileRowBF16 reads every row back.
func TestPackTileBF16Layout(t *testing.T) {
	const n, k = 70, 96 // two blocks of 32 and 6 rows
	b, _, _ := randAMXOperands(11, n, k)
	want := make([]uint16, 64*k)
	packAMX(b, 64, k, want)
	for _, threads := range []int{1, 3} {
		tl := append([]uint16(nil), b...)
		PackTileBF16(tl, n, k, threads)
		for i := range want {
			if tl[i] != want[i] {
				t.Fatalf("threads %d: value %d of the packed blocks is %#x, packAMX's %#x", threads, i, tl[i], want[i])
			}
		}
		for i := 64 * k; i < n*k; i++ {
			if tl[i] != b[i] {
				t.Fatalf("threads %d: value %d of the ragged rows changed from %#x to %#x", threads, i, b[i], tl[i])
			}
		}
		row := make([]uint16, k)
		for r := range n {
			TileRowBF16(row, tl, n, k, r)
			for p, v := range row {
				if v != b[r*k+p] {
					t.Fatalf("threads %d: TileRowBF16 row %d value %d is %#x, want %#x", threads, r, p, v, b[r*k+p])
				}
			}
		}
	}
}

// TestSgemmTileBF16TransB: the product over B in the tile layout equals,
// bit for bit, SgemmDotBF16TransB's AMX path over B in rows, for
// batches of one row, a partial block, whole blocks and chunks of A (k
// 4,864: one block of A a chunk), B with and without ragged rows, with
// alpha and beta and without, on 1 to 3 threads; with amxRunGo as the
// kernel everywhere, and with the tile unit's own kernels where the CPU
// has them, in each way of prefetching; an unknown way is refused.
func TestSgemmTileBF16TransB(t *testing.T) {
	if !HasDotBF16() || blockTr8 == nil {
		t.Skip("no AVX512_BF16 (the path rounds A with it)")
	}
	kernels := []string{"amxRunGo"}
	if on, _ := HasAMX(); on {
		kernels = append(kernels, "tile unit")
	}
	for _, kern := range kernels {
		// The ways of reading B (setAMXStream) change the kernel the tile
		// unit runs; amxRunGo reads no prefetch address.
		streams := []string{""}
		if kern == "tile unit" {
			streams = append(streams, "nopf", "avx")
		}
		for _, stream := range streams {
			t.Run(kern+"/"+stream, func(t *testing.T) {
				if kern == "amxRunGo" {
					withGoAMX(t)
				}
				if err := setAMXStream(stream); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = setAMXStream("") })
				testTileProducts(t)
			})
		}
	}
	// Guided tasks (BenchmarkTileLayers' "tg") split the blocks of B
	// differently, not the sums: the same bits as two equal tasks a
	// thread, on 2 and 3 threads.
	t.Run("amxRunGo/guided", func(t *testing.T) {
		withGoAMX(t)
		t.Cleanup(func() { amxTasksPerThread = 0 })
		for _, c := range []struct{ m, n, k int }{{32, 2560, 256}, {20, 1600, 96}, {64, 1280, 128}} {
			b, _, _ := randAMXOperands(uint64(c.n), c.n, c.k)
			PackTileBF16(b, c.n, c.k, 2)
			a := randNormals(rand.New(rand.NewPCG(uint64(c.m), 6)), c.m*c.k)
			for _, threads := range []int{2, 3} {
				var out [2][]float32
				for i, tasks := range []int{0, -1} {
					amxTasksPerThread = tasks
					out[i] = make([]float32, c.m*c.n)
					if !SgemmTileBF16TransB(c.m, c.n, c.k, 1, a, c.k, b, 0, out[i], c.n, threads) {
						t.Fatal("declined with the AMX path on")
					}
				}
				for i := range out[0] {
					if math.Float32bits(out[1][i]) != math.Float32bits(out[0][i]) {
						t.Fatalf("%+v, %d threads: C[%d][%d] = %g in guided tasks, %g in equal ones", c, threads, i/c.n, i%c.n, out[1][i], out[0][i])
					}
				}
			}
		}
	})
	if err := setAMXStream("far"); err == nil {
		t.Error(`R1GO_AMX_STREAM="far" was taken`)
	}
}

// testTileProducts: SgemmTileBF16TransB against SgemmDotBF16TransB over
// B in rows, bit for bit, for shapes from one row to several blocks of A,
// three pairs of alpha and beta, on 1-3 threads.
func testTileProducts(t *testing.T) {
	for _, c := range []struct{ m, n, k int }{
		{1, 64, 64}, {20, 70, 96}, {32, 1280, 896}, {40, 64, 4864}, {100, 326, 4864}, {64, 96, 896},
	} {
		b, _, _ := randAMXOperands(uint64(c.n), c.n, c.k)
		bt := append([]uint16(nil), b...)
		PackTileBF16(bt, c.n, c.k, 2)
		r := rand.New(rand.NewPCG(uint64(c.m), 5))
		a, c0 := randNormals(r, c.m*c.k), randNormals(r, c.m*c.n)
		for _, ab := range [][2]float32{{1, 0}, {0.5, 0.25}, {1, 1}} {
			for _, threads := range []int{1, 2, 3} {
				name := fmt.Sprintf("%+v alpha %g beta %g threads %d", c, ab[0], ab[1], threads)
				want := append([]float32(nil), c0...)
				SgemmDotBF16TransB(c.m, c.n, c.k, ab[0], a, c.k, b, c.k, ab[1], want, c.n, threads)
				got := append([]float32(nil), c0...)
				if !SgemmTileBF16TransB(c.m, c.n, c.k, ab[0], a, c.k, bt, ab[1], got, c.n, threads) {
					t.Fatalf("%s: declined with the AMX path on", name)
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("%s: C[%d][%d] = %g over B in the tile layout, %g over B in rows", name, i/c.n, i%c.n, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestSgemmTileBF16TransBDeclines: with the AMX path off the product
// returns false and leaves C alone, so that a caller goes elsewhere.
func TestSgemmTileBF16TransBDeclines(t *testing.T) {
	HasAMX()
	on := amx.on
	amx.on = false
	t.Cleanup(func() { amx.on = on })
	c := []float32{7, 7, 7, 7}
	b := make([]uint16, 2*32)
	if SgemmTileBF16TransB(2, 2, 32, 1, make([]float32, 64), 32, b, 0, c, 2, 1) {
		t.Fatal("the tile-layout product ran with the AMX path off")
	}
	for _, v := range c {
		if v != 7 {
			t.Fatalf("C written by a declined product: %v", c)
		}
	}
}

// BenchmarkTileLayers times a batch-32 decode step's products as the
// model runs them, from memory: Qwen2.5-0.5B's 24 layers of q|k|v (1,152
// × 896), o (896 × 896), gate|up (9,728 × 896) and down (896 × 4,864),
// then the 151,936-row LM head, 0.99 GB of bf16 weights. The tile layout
// with eight, two and one tasks a thread (amxTasksPerThread) and in
// guided tasks ("tg": guidedTasks, long first, short last), and the
// matrices in rows on the AMX path ("rows"), take turns, a pass each; so
// do, at two tasks a thread, the tile layout read without prefetching
// (setAMXStream "nopf": "t2-nopf"), with AVX-512 loads of the next block
// ("avx": "t2-avx") and in huge pages ("t2-huge", package pages). Each reports its best pass in GB/s of
// weights read, in all ("-GB/s") and by kind (the layers' small q|k|v
// and o, their MLP, the head), the figures to set beside
// BenchmarkDotBF16Stream's (MLP and head only, back to back) and the read
// bandwidth.
func BenchmarkTileLayers(b *testing.B) {
	if on, why := HasAMX(); !on {
		b.Skip("AMX path off:", why)
	}
	const m, layers = 32, 24
	type mat struct {
		rows, tiles, huge []uint16
		n, k, kind        int
	}
	kinds := []string{"small", "mlp", "head"}
	var mats []mat
	bytes := make([]float64, len(kinds))
	add := func(n, k, kind int) {
		w := make([]uint16, n*k)
		for i := range w {
			w[i] = uint16(0x3c00 + i%97)
		}
		t := append([]uint16(nil), w...)
		PackTileBF16(t, n, k, 0)
		h := pages.Alloc[uint16](len(t), true)
		copy(h, t)
		mats = append(mats, mat{w, t, h, n, k, kind})
		bytes[kind] += float64(2 * n * k)
	}
	for range layers {
		add(1152, 896, 0)
		add(896, 896, 0)
		add(9728, 896, 1)
		add(896, 4864, 1)
	}
	add(151936, 896, 2)
	a := make([]float32, m*4864)
	for i := range a {
		a[i] = float32(i%13) * 0.1
	}
	c := make([]float32, m*151936)
	threads := runtime.GOMAXPROCS(0)
	type variant struct {
		name   string
		tasks  int
		tiles  bool
		stream string // setAMXStream's way of prefetching
		huge   bool   // the tile layout in huge pages
	}
	vs := []variant{{"t8", 8, true, "", false}, {"t2", 2, true, "", false}, {"t1", 1, true, "", false}, {"rows", 8, false, "", false},
		{"t2-nopf", 2, true, "nopf", false}, {"t2-avx", 2, true, "avx", false}, {"t2-huge", 2, true, "", true},
		{"tg", -1, true, "", false}}
	defer func() { _ = setAMXStream("") }()
	best := make([]time.Duration, len(vs))
	bestKinds := make([][]time.Duration, len(vs))
	for b.Loop() {
		for i, v := range vs {
			amxTasksPerThread = v.tasks
			if err := setAMXStream(v.stream); err != nil {
				b.Fatal(err)
			}
			per := make([]time.Duration, len(kinds))
			t0 := time.Now()
			for _, w := range mats {
				tk := time.Now()
				if v.tiles {
					t := w.tiles
					if v.huge {
						t = w.huge
					}
					SgemmTileBF16TransB(m, w.n, w.k, 1, a, w.k, t, 0, c, w.n, threads)
				} else {
					SgemmDotBF16TransB(m, w.n, w.k, 1, a, w.k, w.rows, w.k, 0, c, w.n, threads)
				}
				per[w.kind] += time.Since(tk)
			}
			if d := time.Since(t0); best[i] == 0 || d < best[i] {
				best[i], bestKinds[i] = d, per
			}
		}
	}
	amxTasksPerThread = 0
	total := bytes[0] + bytes[1] + bytes[2]
	for i, v := range vs {
		b.ReportMetric(total/best[i].Seconds()/1e9, v.name+"-GB/s")
		for j, kind := range kinds {
			b.ReportMetric(bytes[j]/bestKinds[i][j].Seconds()/1e9, v.name+"-"+kind+"-GB/s")
		}
	}
}
