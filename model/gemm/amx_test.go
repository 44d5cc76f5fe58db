package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"golang.org/x/sys/cpu"
)

// The AMX path's driver (packing, blocks of 32, the ragged rest of B on
// the vector path, the transposed write of each block with alpha and
// beta) runs everywhere with amxBlockGo as its kernel; the tile kernel
// itself only where the CPU has AMX (a Sapphire Rapids or
// later Xeon, or Linux inside the Bochs emulator's sapphire_rapids model:
// benchmarks/README.md, session 5).

// withGoAMX turns the AMX path on with amxBlockGo as its kernel for the
// rest of the test.
func withGoAMX(t *testing.T) {
	t.Helper()
	HasAMX() // decide once, then override
	on, kern := amx.on, amxKern
	amx.on, amxKern = true, amxBlockGo
	t.Cleanup(func() { amx.on, amxKern = on, kern })
}

// TestPackAMXLayout places every value of A where the tile unit reads it:
// row r, depth p lands in block r/32, half (r%32)/16, step p/32, tile row
// (p%32)/2, pair r%16, half p%2; padding rows are zero.
func TestPackAMXLayout(t *testing.T) {
	if blockTr8 == nil {
		t.Skip("no 8 × 8 transpose kernel here")
	}
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

// TestSgemmAMXDriver runs SgemmDotBF16TransB's AMX path with amxBlockGo
// against the float64 product, with and without prefetching: B row counts
// below one block, at one, with ragged rests, and of ten blocks (tasks of
// more than one); A row counts of one, a partial block, two blocks and
// more than one chunk of A (k 4,864: 32 rows a chunk); B's rows packed and
// with a pitch beyond k.
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
			{8, 320, 64, 64, 72, 320},
		})
	}
}

// TestAMXKernelAgainstGo compares the tile kernel with amxBlockGo on
// random bf16 operands of a decode product's depth (896): the same sums
// up to float32 rounding order, within 2⁻²⁰ of Σ|a·b|.
func TestAMXKernelAgainstGo(t *testing.T) {
	if on, why := HasAMX(); !on {
		if os.Getenv("R1GO_AMX_REQUIRE") == "1" { // where the tile kernel must run: an AMX machine, the emulator
			t.Fatal("AMX path off:", why)
		}
		t.Skip("AMX path off:", why)
	}
	const k = 896
	r := rand.New(rand.NewPCG(7, 8))
	b := make([]uint16, amxRows*k)
	a := make([]uint16, amxRows*k)
	for i := range b {
		b[i] = bf16Bits(float32(r.NormFloat64() * 0.1))
		a[i] = bf16Bits(float32(r.NormFloat64()))
	}
	act := make([]uint16, amxRows*k)
	packAMX(a, amxRows, k, act)
	got, want := make([]float32, amxRows*amxRows), make([]float32, amxRows*amxRows)
	amxAsm(k/32, b, k, act, got, nil)
	amxBlockGo(k/32, b, k, act, want, nil)
	wide := func(h uint16) float64 { return float64(math.Float32frombits(uint32(h) << 16)) }
	for j := 0; j < amxRows; j++ {
		for i := 0; i < amxRows; i++ {
			var mag float64
			for p := 0; p < k; p++ {
				mag += math.Abs(wide(b[j*k+p]) * wide(a[i*k+p]))
			}
			if d := math.Abs(float64(got[j*amxRows+i] - want[j*amxRows+i])); d > mag*math.Pow(2, -20) {
				t.Fatalf("block[%d][%d] = %g, amxBlockGo %g (Σ|a·b| %g)", j, i, got[j*amxRows+i], want[j*amxRows+i], mag)
			}
		}
	}
}

// TestHasAMXFollowsTheCPU: the path is never on without AMX-BF16 or
// with R1GO_AMX=0, and off only with a reason.
func TestHasAMXFollowsTheCPU(t *testing.T) {
	on, why := HasAMX()
	if on && !(cpu.X86.HasAMXTile && cpu.X86.HasAMXBF16 && os.Getenv("R1GO_AMX") != "0") {
		t.Fatal("AMX path on without AMX-BF16 or with R1GO_AMX=0")
	}
	if !on && why == "" {
		t.Fatal("AMX path off without a reason")
	}
	t.Logf("AMX path on: %v %s", on, why)
}

// BenchmarkAMXBlock times the tile kernel alone on one block (32 rows of
// B against 32 packed rows of A), repeated on the same operands, at the
// depths of a decode's products: at k = 256 both operands (16 KiB each)
// stay in L1, at 896 (56 KiB each) and 4,864 (304 KiB) they come from L2.
// Set beside the tile unit's rate (16 × 16 × 32 multiply-adds per
// TDPBF16PS) it says how much of a block's time goes to its tile loads.
func BenchmarkAMXBlock(b *testing.B) {
	if on, why := HasAMX(); !on {
		b.Skip("AMX path off:", why)
	}
	for _, k := range []int{256, 896, 4864} {
		bw := make([]uint16, amxRows*k)
		a := make([]uint16, amxRows*k)
		for i := range bw {
			bw[i], a[i] = bf16Bits(float32(i%29-14)/8), bf16Bits(float32(i%23-11)/16)
		}
		act := make([]uint16, amxRows*k)
		packAMX(a, amxRows, k, act)
		out := make([]float32, amxRows*amxRows)
		b.Run(fmt.Sprintf("k%d", k), func(b *testing.B) {
			for b.Loop() {
				amxAsm(k/32, bw, k, act, out, nil)
			}
			b.ReportMetric(2*float64(amxRows*amxRows*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
