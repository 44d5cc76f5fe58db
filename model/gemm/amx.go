package gemm

import (
	"fmt"
	"math"
	"os"
	"sync"
	"unsafe"
)

// The AMX path of the bf16 dot product: on CPUs with AMX-BF16 (Intel Xeon
// from Sapphire Rapids on) SgemmDotBF16TransB runs its products on the
// tile unit. One TDPBF16PS multiplies a 16 × 32 bf16 tile by a 32 × 16 one
// into 16 × 16 float32 sums, 8,192 multiply-adds, so a core does hundreds
// of bf16 multiply-adds a cycle against VDPBF16PS's 32: a batch-32 decode
// step, which on a few cores waits on the vector units, becomes a wait on
// memory, as on a GPU.
//
// Like the vector path it computes Cᵀ = B·Aᵀ with B (the weights) read in
// place: a tile is 16 rows of B, 64 bytes apart in depth, loaded with B's
// own row pitch. A (a few dozen rows, rounded to bf16) is the second
// operand, which the unit wants in pairs: row kk of its tile holds each
// row's bf16 values at depth 2kk and 2kk+1 side by side (packAMX, the
// broadcast kernels' packPairs for 16 rows at a time). Each
// block of 32 B rows × 32 A rows is four tiles of sums, stored and then
// written to C transposed. The contract is SgemmDotBF16TransB's: A rounded
// to bf16, products summed in float32 (in another order than the vector
// path; the tile unit also treats denormal inputs as zero).
//
// Linux hands out the 8 KiB tile state only to a process that asks
// (arch_prctl ARCH_REQ_XCOMP_PERM), once, for all its threads; a
// process that did not ask dies of SIGILL at the first tile instruction.
// The path is taken where the CPU reports AMX-BF16, the kernel grants the
// state and a first product agrees with amxBlockGo, unless R1GO_AMX=0
// turns it off. On the GPU machine's Xeon (Emerald Rapids, 2 cores) it
// ran the bf16 rollout copy's batch-32 decode 2.8 × faster than the
// vector kernels (benchmarks/README.md, session 7).

// amxRows is the block's side: two tiles of 16 rows of B, two of A.
const amxRows = 32

// amxTileConfig is the tile configuration amxBlockBF16 loads: palette 1,
// eight tiles of 16 rows of 64 bytes (byte 0 the palette, bytes 16-31 the
// bytes per row of tiles 0-7 as uint16, bytes 48-55 their rows).
var amxTileConfig = func() (cfg [64]byte) {
	cfg[0] = 1
	for t := 0; t < 8; t++ {
		cfg[16+2*t] = 64
		cfg[48+t] = 16
	}
	return cfg
}()

// amx holds whether the AMX path is on, decided once on first use.
var amx struct {
	once   sync.Once
	on     bool
	reason string // why it is off, for HasAMX's callers
}

// HasAMX says whether the bf16 dot product runs on AMX tiles here, and if
// not, why.
func HasAMX() (bool, string) {
	amx.once.Do(func() { amx.on, amx.reason = enableAMX() })
	return amx.on, amx.reason
}

func enableAMX() (bool, string) {
	if os.Getenv("R1GO_AMX") == "0" {
		return false, "turned off (R1GO_AMX=0)"
	}
	if !hasDotBF16 {
		return false, "no AVX512_BF16"
	}
	if err := requestAMX(); err != nil {
		return false, err.Error()
	}
	if err := amxSelfCheck(); err != nil {
		fmt.Fprintf(os.Stderr, "gemm: %v; the AMX path stays off\n", err)
		return false, err.Error()
	}
	return true, ""
}

// amxSelfCheck runs one block of 32 × 32 × 64 on the tile unit and on
// amxBlockGo and reports any disagreement (the values make every sum
// exact, so there is no rounding to allow for): a CPU, kernel or emulator
// that gets the tile instructions wrong must not silently corrupt a
// rollout.
func amxSelfCheck() error {
	const k = 64
	b := make([]uint16, amxRows*k)
	a := make([]uint16, amxRows*k)
	for i := range b {
		b[i] = bf16Bits(float32(i%29-14) / 8)
		a[i] = bf16Bits(float32(i%23-11) / 16)
	}
	act := make([]uint16, amxRows*k)
	packAMX(a, amxRows, k, act)
	got, want := make([]float32, amxRows*amxRows), make([]float32, amxRows*amxRows)
	amxAsm(k/32, b, k, act, got, nil)
	amxBlockGo(k/32, b, k, act, want, nil)
	for i := range got {
		// The values are small multiples of 2⁻⁷: every sum is exact.
		if got[i] != want[i] {
			return fmt.Errorf("AMX self-check: element %d of a 32 × 32 block is %g, want %g", i, got[i], want[i])
		}
	}
	return nil
}

func bf16Bits(f float32) uint16 { return uint16(math.Float32bits(f) >> 16) }

// packAMX writes rows [0, rows) of the bf16 matrix a16 (k values each, k
// apart, padded with zero rows to a multiple of 8) into dst as
// amxBlockBF16's A operand, rows padded with zeros to a multiple of 32:
// for each block of 32 rows, its two halves of 16 one after the other,
// each in packPairs's 16-lane form (the 16 rows' pair p at 32-bit words
// 16p to 16p+15), which is a run of k/32 tiles, one a step of depth 32.
// dst has ceil(rows/32)·32·k values.
func packAMX(a16 []uint16, rows, k int, dst []uint16) {
	const half = amxRows / 2
	for r0 := 0; r0 < ceilDiv(rows, amxRows)*amxRows; r0 += half {
		run := dst[r0*k:][:half*k]
		if r0 >= rows {
			clear(run)
			continue
		}
		packPairs(a16[r0*k:], k, min(half, rows-r0), half, run)
	}
}

// amxBlockGo is amxBlockBF16 in Go, the tile instruction's arithmetic
// spelled out (float32 sums, two products of a pair per step): the
// reference of the self-check and the tests, and the kernel the driver's
// tests run on CPUs without AMX.
func amxBlockGo(k32 int, b []uint16, ldb int, act []uint16, out []float32, _ []uint16) {
	wide := func(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
	for r := 0; r < amxRows; r++ {
		for i := 0; i < amxRows; i++ {
			t, ii := i/16, i%16
			var s float32
			for st := 0; st < k32; st++ {
				tile := act[(t*k32+st)*512:][:512]
				row := b[r*ldb+st*32:][:32]
				for kk := 0; kk < 16; kk++ {
					s = float32(s + wide(row[2*kk])*wide(tile[kk*32+2*ii]))
					s = float32(s + wide(row[2*kk+1])*wide(tile[kk*32+2*ii+1]))
				}
			}
			out[r*amxRows+i] = s
		}
	}
}

// amxKernel is a block kernel: amxKern is amxAsm, or amxBlockGo, which the
// tests swap in to run the driver on CPUs without AMX. next, where not
// nil, is the block of B this thread reads after b, for the kernel to
// prefetch (amxBlockGo ignores it).
type amxKernel func(k32 int, b []uint16, ldb int, act []uint16, out []float32, next []uint16)

var amxKern amxKernel = amxAsm

func amxAsm(k32 int, b []uint16, ldb int, act []uint16, out []float32, next []uint16) {
	pf := uintptr(unsafe.Pointer(&b[0])) // no next block: the prefetches hit lines in hand
	if next != nil {
		pf = uintptr(unsafe.Pointer(&next[0]))
	}
	amxBlockBF16(k32, &b[0], uintptr(2*ldb), &act[0], &out[0], &amxTileConfig[0], pf)
}

// amxPrefetch passes each block's kernel the task's next block of B to
// prefetch into L2 (the kernel's comment says why); off, the benchmarks'
// same-run before. A decode step's products from memory (0.9 GB,
// BenchmarkDotBF16Stream) on the GPU machine's Xeon read 19.2 GB/s with
// it and 18.6 without on 2 cores, 48.9 and 45.8 on 16. Copying each block
// in order into an L2 buffer first, so that memory is read as one stream,
// was slower than both (12.7 and 41.1).
var amxPrefetch = true

// sgemmAMX is SgemmDotBF16TransB on the tile unit for the first n/32·32
// rows of B, the vector path for the rest. a16 holds A already rounded
// (rows k apart, at least m of them).
func sgemmAMX(m, n, k int, alpha float32, a16 []uint16, b []uint16, ldb int, beta float32, c []float32, ldc int, threads int) {
	full := n / amxRows * amxRows
	if full < n {
		dotRows(m, n-full, k, alpha, a16, b[full*ldb:], ldb, beta, c[full:], ldc, threads)
	}
	if full == 0 {
		return
	}
	// A's blocks in chunks that stay in L2 while every block of B passes
	// them: B is read from memory once per chunk (once for a decode batch).
	chunk := max(amxRows, dotBlockBytes/(2*k)/amxRows*amxRows)
	act := getDotScratch((min(m, chunk) + amxRows - 1) / amxRows * amxRows * k)
	defer putDotScratch(act)
	for r0 := 0; r0 < m; r0 += chunk {
		rows := min(chunk, m-r0)
		pk := (*act)[:(rows+amxRows-1)/amxRows*amxRows*k]
		packAMX(a16[r0*k:], rows, k, pk)
		if amxMode == "block" {
			amxChunk(r0, rows, full, k, alpha, pk, b, ldb, beta, c, ldc, threads)
		} else {
			amxChunkRun(r0, rows, full, k, alpha, pk, b, amxRowsLayout(ldb), beta, c, ldc, threads, amxRunKern[amxMode])
		}
	}
}

// amxOut pools the blocks of sums a task writes C from.
var amxOut sync.Pool

// amxChunk computes rows [r0, r0+rows) of C's first full columns from the
// packed rows pk, the threads taking runs of 32-row blocks of B.
func amxChunk(r0, rows, full, k int, alpha float32, pk, b []uint16, ldb int, beta float32, c []float32, ldc int, threads int) {
	blocksB, blocksA := full/amxRows, (rows+amxRows-1)/amxRows
	tasks := min(blocksB, 8*threads)
	forEach(threads, tasks, func(t int) {
		ob, _ := amxOut.Get().(*[amxRows * amxRows]float32)
		if ob == nil {
			ob = new([amxRows * amxRows]float32)
		}
		defer amxOut.Put(ob)
		out := ob[:]
		end := (t + 1) * blocksB / tasks
		for jb := t * blocksB / tasks; jb < end; jb++ {
			j0 := jb * amxRows
			// The task's last block prefetches nothing: the block after it
			// is another task's, often on another core (prefetched anyway,
			// it cost the down product, 28 blocks in 16 tasks on 2 cores,
			// 7-15 %).
			var next []uint16
			if amxPrefetch && jb+1 < end {
				next = b[(j0+amxRows)*ldb:]
			}
			for ib := 0; ib < blocksA; ib++ {
				amxKern(k/32, b[j0*ldb:], ldb, pk[ib*amxRows*k:], out, next)
				// out is Cᵀ's block: B's rows down, A's across.
				storeCT(out, amxRows, amxRows, r0+ib*amxRows, min(amxRows, rows-ib*amxRows), j0, alpha, beta, c, ldc)
			}
		}
	})
}
