package gemm

import (
	"fmt"
	"math"
	"os"
	"sync"
	"unsafe"
)

// amxLayout says where a run kernel finds B's tiles, in uint16 elements:
// a tile's 16 rows are ld apart, a step of depth 32 moves step, a block's
// rows 16-31 start half after its rows 0-15, and the next block starts
// block after this one.
type amxLayout struct{ ld, step, half, block int }

// amxRowsLayout is B read in place, rows ldb apart: a tile row is 64
// bytes of one row of B, each of the 32 rows of a block its own stream.
func amxRowsLayout(ldb int) amxLayout { return amxLayout{ldb, 32, 16 * ldb, 32 * ldb} }

// amxPackedLayout is B as packAMXB writes it: each tile's 1 KiB in one
// piece, a block's tiles in the order the kernel reads them, so that B is
// one stream.
func amxPackedLayout(k int) amxLayout { return amxLayout{32, 512, k / 32 * 512, 32 * k} }

// amxRunKernel computes nb blocks of Cᵀ = B·Aᵀ (32 rows of B each, in
// layout lay from b) against the 32 packed rows act, into out (nb blocks
// of 32 × 32, B's rows down), asking for last's lines while it does the
// last block.
type amxRunKernel func(nb, k32 int, b []uint16, lay amxLayout, act []uint16, out []float32, last []uint16)

// amxRunMax is the most blocks one run kernel call takes: its sums, 4 KiB
// a block, stay in L1 until storeCT writes them out.
const amxRunMax = 8

// amxRunAsm returns the tile run kernel of a driver mode: "run" asks for
// the next block into L2, "run-t0" also for the tiles two steps ahead into
// L1, "run-nopf" for nothing.
func amxRunAsm(mode string) amxRunKernel {
	fn := map[string]func(nb, k32 int, b *uint16, ldb, bstep, bhalf, bblock uintptr, act *uint16, out *float32, cfg *byte, last uintptr){
		"run": amxRunBF16, "run-t0": amxRunBF16T0, "run-nopf": amxRunBF16NP}[mode]
	return func(nb, k32 int, b []uint16, lay amxLayout, act []uint16, out []float32, last []uint16) {
		fn(nb, k32, &b[0], uintptr(2*lay.ld), uintptr(2*lay.step), uintptr(2*lay.half), uintptr(2*lay.block),
			&act[0], &out[0], &amxTileConfig[0], uintptr(unsafe.Pointer(&last[0])))
	}
}

// amxRunModes are the run kernels' driver modes.
var amxRunModes = []string{"run", "run-t0", "run-nopf"}

// amxRunGo is the run kernel in Go, amxBlockGo's arithmetic over any
// layout: the tests' reference and the kernel they run the driver with on
// CPUs without AMX.
func amxRunGo(nb, k32 int, b []uint16, lay amxLayout, act []uint16, out []float32, _ []uint16) {
	wide := func(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
	for q := 0; q < nb; q++ {
		blk := b[q*lay.block:]
		for r := 0; r < amxRows; r++ {
			for i := 0; i < amxRows; i++ {
				t, ii := i/16, i%16
				var s float32
				for st := 0; st < k32; st++ {
					tile := act[(t*k32+st)*512:][:512]
					row := blk[(r/16)*lay.half+st*lay.step+(r%16)*lay.ld:][:32]
					for kk := 0; kk < 16; kk++ {
						s = float32(s + wide(row[2*kk])*wide(tile[kk*32+2*ii]))
						s = float32(s + wide(row[2*kk+1])*wide(tile[kk*32+2*ii+1]))
					}
				}
				out[q*amxRows*amxRows+r*amxRows+i] = s
			}
		}
	}
}

// packAMXB writes the first n/32·32 rows of B (bf16, k values each, ldb
// apart; k a multiple of 32) into dst in amxPackedLayout(k): for each block
// of 32 rows, its half of rows 0-15 then rows 16-31, each a run of k/32
// tiles of 16 rows × 32 values. dst has n/32·32·k values.
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

// amxRunOut pools the blocks of sums a task writes C from.
var amxRunOut = sync.Pool{New: func() any { return new([amxRunMax * amxRows * amxRows]float32) }}

// amxChunkRun is amxChunk with a run kernel: the threads take runs of
// B's blocks (in layout lay), each call of kern up to amxRunMax of them.
func amxChunkRun(r0, rows, full, k int, alpha float32, pk, b []uint16, lay amxLayout, beta float32, c []float32, ldc int, threads int, kern amxRunKernel) {
	blocksB, blocksA := full/amxRows, (rows+amxRows-1)/amxRows
	tasks := min(blocksB, 8*threads)
	forEach(threads, tasks, func(t int) {
		ob := amxRunOut.Get().(*[amxRunMax * amxRows * amxRows]float32)
		defer amxRunOut.Put(ob)
		end := (t + 1) * blocksB / tasks
		for j := t * blocksB / tasks; j < end; j += amxRunMax {
			nb := min(amxRunMax, end-j)
			// The run's last block asks for the task's next run, or for
			// its own lines (the block after the task is another's).
			last := b[(j+nb-1)*lay.block:]
			if amxPrefetch && j+nb < end {
				last = b[(j+nb)*lay.block:]
			}
			for ib := 0; ib < blocksA; ib++ {
				kern(nb, k/32, b[j*lay.block:], lay, pk[ib*amxRows*k:], ob[:], last)
				for q := 0; q < nb; q++ {
					storeCT(ob[q*amxRows*amxRows:], amxRows, amxRows, r0+ib*amxRows, min(amxRows, rows-ib*amxRows), (j+q)*amxRows, alpha, beta, c, ldc)
				}
			}
		}
	})
}

// amxMode picks the driver's kernel: "block" (amxKern, one block a call)
// or a run mode (amxRunAsm, runs of blocks). The benchmarks compare them.
var amxMode = "block"

// R1GO_AMX_MODE sets amxMode for the device's same-run comparisons.
func init() {
	switch m := os.Getenv("R1GO_AMX_MODE"); m {
	case "block", "run", "run-t0", "run-nopf":
		amxMode = m
	case "":
	default:
		fmt.Fprintf(os.Stderr, "gemm: R1GO_AMX_MODE=%q is not block, run, run-t0 or run-nopf; keeping %s\n", m, amxMode)
	}
}

// amxRunKern holds the run kernel of each run mode (the tests swap in
// amxRunGo).
var amxRunKern = func() map[string]amxRunKernel {
	k := map[string]amxRunKernel{}
	for _, m := range amxRunModes {
		k[m] = amxRunAsm(m)
	}
	return k
}()

// sgemmAMXPacked is sgemmAMX for B packed by packAMXB (bp, n/32·32 rows;
// n a multiple of 32), with the run kernel of mode.
func sgemmAMXPacked(m, n, k int, alpha float32, a16 []uint16, bp []uint16, beta float32, c []float32, ldc int, threads int, mode string) {
	chunk := max(amxRows, dotBlockBytes/(2*k)/amxRows*amxRows)
	act := getDotScratch((min(m, chunk) + amxRows - 1) / amxRows * amxRows * k)
	defer putDotScratch(act)
	for r0 := 0; r0 < m; r0 += chunk {
		rows := min(chunk, m-r0)
		pk := (*act)[:(rows+amxRows-1)/amxRows*amxRows*k]
		packAMX(a16[r0*k:], rows, k, pk)
		amxChunkRun(r0, rows, n, k, alpha, pk, bp, amxPackedLayout(k), beta, c, ldc, threads, amxRunKern[mode])
	}
}
