package gemm

import (
	"fmt"
	"math"
	"os"
	"sync"
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
// row's bf16 values at depth 2kk and 2kk+1 side by side (packAMX). Each
// block of 32 B rows × 32 A rows is four tiles of sums, stored and then
// written to C transposed. The contract is SgemmDotBF16TransB's: A rounded
// to bf16, products summed in float32 (in another order than the vector
// path; the tile unit also treats denormal inputs as zero).
//
// Linux hands out the 8 KiB tile state only to a process that asks
// (arch_prctl ARCH_REQ_XCOMP_PERM), once, for all its threads; a
// process that did not ask dies of SIGILL at the first tile instruction.
// The path is taken only when R1GO_AMX=1 asks for it (until the tile
// kernel has run on real hardware, not only in an emulator), the CPU
// reports AMX-BF16, the kernel grants the state, and a first product
// agrees with amxBlockGo.

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
	if os.Getenv("R1GO_AMX") != "1" {
		return false, "not asked for (R1GO_AMX=1)"
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
	packAMX(a, k, amxRows, k, act)
	got, want := make([]float32, amxRows*amxRows), make([]float32, amxRows*amxRows)
	amxBlockBF16(k/32, &b[0], uintptr(2*k), &act[0], &got[0], &amxTileConfig[0])
	amxBlockGo(k/32, b, k, act, want)
	for i := range got {
		// The values are small multiples of 2⁻⁷: every sum is exact.
		if got[i] != want[i] {
			return fmt.Errorf("AMX self-check: element %d of a 32 × 32 block is %g, want %g", i, got[i], want[i])
		}
	}
	return nil
}

func bf16Bits(f float32) uint16 { return uint16(math.Float32bits(f) >> 16) }

// packAMX writes rows [0, rows) of the bf16 matrix a16 (k values each, lda
// apart) into dst as amxBlockBF16's A operand, rows padded with zeros to a
// multiple of 32: for each block of 32 rows and each depth step of 32, two
// tiles of 16 × 16 pairs, tile t's row kk holding, for each of its rows i,
// the values at depth 2kk and 2kk+1. dst has ceil(rows/32)·32·k values.
func packAMX(a16 []uint16, lda, rows, k int, dst []uint16) {
	steps := k / 32
	for blk := 0; blk*amxRows < rows; blk++ {
		for s := 0; s < steps; s++ {
			for t := 0; t < 2; t++ {
				tile := dst[((blk*steps+s)*2+t)*512:][:512]
				for i := 0; i < 16; i++ {
					r := blk*amxRows + t*16 + i
					if r >= rows {
						for kk := 0; kk < 16; kk++ {
							tile[kk*32+2*i], tile[kk*32+2*i+1] = 0, 0
						}
						continue
					}
					src := a16[r*lda+s*32:][:32]
					for kk := 0; kk < 16; kk++ {
						tile[kk*32+2*i], tile[kk*32+2*i+1] = src[2*kk], src[2*kk+1]
					}
				}
			}
		}
	}
}

// amxBlockGo is amxBlockBF16 in Go, the tile instruction's arithmetic
// spelled out (float32 sums, two products of a pair per step): the
// reference of the self-check and the tests, and the kernel the driver's
// tests run on CPUs without AMX.
func amxBlockGo(k32 int, b []uint16, ldb int, act []uint16, out []float32) {
	wide := func(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
	for r := 0; r < amxRows; r++ {
		for i := 0; i < amxRows; i++ {
			t, ii := i/16, i%16
			var s float32
			for st := 0; st < k32; st++ {
				tile := act[(st*2+t)*512:][:512]
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
// tests swap in to run the driver on CPUs without AMX.
type amxKernel func(k32 int, b []uint16, ldb int, act []uint16, out []float32)

var amxKern amxKernel = amxAsm

func amxAsm(k32 int, b []uint16, ldb int, act []uint16, out []float32) {
	amxBlockBF16(k32, &b[0], uintptr(2*ldb), &act[0], &out[0], &amxTileConfig[0])
}

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
		packAMX(a16[r0*k:], k, rows, k, pk)
		amxChunk(r0, rows, full, k, alpha, pk, b, ldb, beta, c, ldc, threads)
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
		for jb := t * blocksB / tasks; jb < (t+1)*blocksB/tasks; jb++ {
			j0 := jb * amxRows
			for ib := 0; ib < blocksA; ib++ {
				amxKern(k/32, b[j0*ldb:], ldb, pk[ib*amxRows*k:], out)
				// out is Cᵀ's block: B's rows down, A's across.
				storeCT(out, amxRows, amxRows, r0+ib*amxRows, min(amxRows, rows-ib*amxRows), j0, alpha, beta, c, ldc)
			}
		}
	})
}
