package gemm

import (
	"fmt"
	"iter"
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
// written to C transposed; a kernel call takes a run of blocks, so that
// the tile configuration is loaded once for several. The contract is
// SgemmDotBF16TransB's: A rounded to bf16, products summed in float32 (in
// another order than the vector path; the tile unit also treats denormal
// inputs as zero).
//
// Linux hands out the 8 KiB tile state only to a process that asks
// (arch_prctl ARCH_REQ_XCOMP_PERM), once, for all its threads; a
// process that did not ask dies of SIGILL at the first tile instruction.
// The path is taken where the CPU reports AMX-BF16, the kernel grants the
// state and a first product agrees with amxRunGo, unless R1GO_AMX=0
// turns it off. On the GPU machine's Xeon (Emerald Rapids, 2 cores) it
// ran the bf16 rollout copy's batch-32 decode 2.8 × faster than the
// vector kernels (2026-11-26, benchmarks/README.md).

// amxRows is the block's side: two tiles of 16 rows of B, two of A.
const amxRows = 32

// amxTileConfig is the tile configuration the kernels load: palette 1,
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
	if err := setAMXStream(os.Getenv("R1GO_AMX_STREAM")); err != nil {
		fmt.Fprintf(os.Stderr, "%v; the streaming kernel prefetches\n", err)
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
// amxRunGo and reports any disagreement (the values make every sum exact,
// so there is no rounding to allow for): a CPU, kernel or emulator that
// gets the tile instructions wrong must not silently corrupt a rollout.
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
	call := amxRunArgs{nb: 1, k32: k / 32, l: b, ls: amxRowsSide(k), r: act, out: got, os: amxBlockSums, pf: b, last: b}
	amxRunAsm(true)(&call)
	call.out = want
	amxRunGo(&call)
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
// apart, padded with zero rows to a multiple of 8) into dst as the run
// kernels' A operand, rows padded with zeros to a multiple of 32: for
// each block of 32 rows, its two halves of 16 one after the other, each
// in packPairs's 16-lane form (the 16 rows' pair p at 32-bit words 16p to
// 16p+15), which is a run of k/32 tiles, one a step of depth 32. dst has
// ceil(rows/32)·32·k values.
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

// amxSide says where a run kernel finds its left operand's tiles, in
// uint16 elements: a tile's 16 rows are ld apart, a step of depth 32
// moves step, a block's rows 16-31 start half after its rows 0-15, and
// the next block starts block after this one.
type amxSide struct{ ld, step, half, block int }

// amxRowsSide is a matrix read in place, rows ld apart: a tile row is 64
// bytes of one row.
func amxRowsSide(ld int) amxSide { return amxSide{ld, 32, 16 * ld, 32 * ld} }

// amxSums says where a run kernel writes its sums, in float32 elements:
// rows pitch apart, rows 16-31 half after rows 0-15, the next block block
// after this one.
type amxSums struct{ pitch, half, block int }

// amxBlockSums is the driver's buffer: 32 × 32 blocks one after another.
var amxBlockSums = amxSums{amxRows, 16 * amxRows, amxRows * amxRows}

// amxRunArgs is one call of a run kernel: nb blocks over depth 32·k32,
// each the sums of 32 rows of the left operand l (in place, where ls
// says) with 32 rows of the right operand r (packed by packAMX, the next
// block rblock after), written to out where os says. A prefetching kernel
// asks, while it does block q, for pf[q·pfstride:], and for last while it
// does the last block.
type amxRunArgs struct {
	nb, k32  int
	l        []uint16
	ls       amxSide
	r        []uint16
	rblock   int
	out      []float32
	os       amxSums
	pf       []uint16
	pfstride int
	last     []uint16
}

// amxRunKernel is a run kernel: amxRunAsm's, or amxRunGo.
type amxRunKernel func(a *amxRunArgs)

// amxRunAsm returns the tile run kernel that prefetches the streamed
// operand's next block into L2, or the one that prefetches nothing (the
// operands in cache).
func amxRunAsm(prefetch bool) amxRunKernel {
	fn := amxRunBF16NP
	if prefetch {
		fn = amxRunBF16
	}
	return amxRunWith(fn, prefetch)
}

// amxRunWith wraps one asm run kernel; prefetch says whether it reads pf
// and last.
func amxRunWith(fn func(nb, k32 int, l *uint16, lld, lstep, lhalf, lblock uintptr, r *uint16, rblock uintptr, out *float32, opitch, ohalf, oblock uintptr, cfg *byte, pf, pfstride, last uintptr), prefetch bool) amxRunKernel {
	return func(a *amxRunArgs) {
		pf, last := &a.l[0], &a.l[0] // read only by the prefetching kernel
		if prefetch {
			pf, last = &a.pf[0], &a.last[0]
		}
		fn(a.nb, a.k32, &a.l[0], uintptr(2*a.ls.ld), uintptr(2*a.ls.step), uintptr(2*a.ls.half), uintptr(2*a.ls.block),
			&a.r[0], uintptr(2*a.rblock), &a.out[0], uintptr(4*a.os.pitch), uintptr(4*a.os.half), uintptr(4*a.os.block),
			&amxTileConfig[0], uintptr(unsafe.Pointer(pf)), uintptr(2*a.pfstride), uintptr(unsafe.Pointer(last)))
	}
}

// amxRunGo is the run kernel in Go, the tile instruction's arithmetic
// spelled out (float32 sums, two products of a pair per step): the
// reference of the self-check and the tests, and the kernel the driver's
// tests run on CPUs without AMX.
func amxRunGo(a *amxRunArgs) {
	wide := func(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
	for q := 0; q < a.nb; q++ {
		l, r := a.l[q*a.ls.block:], a.r[q*a.rblock:]
		for i := 0; i < amxRows; i++ {
			for j := 0; j < amxRows; j++ {
				var s float32
				for st := 0; st < a.k32; st++ {
					row := l[(i/16)*a.ls.half+st*a.ls.step+(i%16)*a.ls.ld:][:32]
					tile := r[((j/16)*a.k32+st)*512:][:512]
					for kk := 0; kk < 16; kk++ {
						s = float32(s + wide(row[2*kk])*wide(tile[kk*32+2*(j%16)]))
						s = float32(s + wide(row[2*kk+1])*wide(tile[kk*32+2*(j%16)+1]))
					}
				}
				a.out[q*a.os.block+(i/16)*a.os.half+(i%16)*a.os.pitch+j] = s
			}
		}
	}
}

// EmulateAMX turns the AMX path on with amxRunGo, the tile instruction's
// arithmetic in Go, as its kernels, for the tests of packages above this
// one on CPUs without AMX (hundreds of times slower than the tile unit);
// restore puts the path back as it was. The path still rounds A and packs
// its operands with the vector kernels: without AVX512_BF16 ok is false and
// nothing changes.
func EmulateAMX() (restore func(), ok bool) {
	if !hasDotBF16 || blockTr8 == nil {
		return func() {}, false
	}
	HasAMX() // decide once, then override
	on, kern := amx.on, amxKern
	amx.on, amxKern, amxEmulating = true, [2]amxRunKernel{amxRunGo, amxRunGo}, true
	return func() { amx.on, amxKern, amxEmulating = on, kern, false }, true
}

// amxEmulating says whether EmulateAMX put amxRunGo in place.
var amxEmulating bool

// amxKern holds the run kernels, for B in cache ([0]) and streamed from
// memory ([1]); the tests swap in amxRunGo.
var amxKern = [2]amxRunKernel{amxRunAsm(false), amxRunAsm(true)}

// amxKernFor is the kernel for A's block ib against a run of B: the
// first streams the run from memory, prefetching as it goes (unless
// amxPrefetch is off); the others find the run in L2.
func amxKernFor(ib int) amxRunKernel {
	if ib == 0 && amxPrefetch {
		return amxKern[1]
	}
	return amxKern[0]
}

// amxPrefetch lets the streaming kernel prefetch; off, the benchmarks'
// same-run before. A decode step's products from memory
// (BenchmarkDotBF16Stream, best of five passes taking turns) on the GPU
// machine's Xeon, in two calls: 23.0 and 16.4 GB/s with it, 22.8 and 15.7
// without on 2 cores, the decode's case; on 16 cores 48.1 and 47.4 with,
// 53.1 and 49.8 without (2026-11-26).
var amxPrefetch = true

// SetAMXStream sets how the AMX path's streaming kernel reads the
// weights, as R1GO_AMX_STREAM does ("", "nopf" or "avx"), for a
// benchmark's A/B turns in one process (benchmarks/cpu -step_streams). It
// must not run beside a product.
func SetAMXStream(v string) error {
	HasAMX() // the path decided, and R1GO_AMX_STREAM read, first
	return setAMXStream(v)
}

// setAMXStream sets how the streaming kernel reads B from memory: ""
// (prefetching the next block into L2), "nopf" (not: the hardware
// prefetchers alone) or "avx" (loading the next block's lines with
// AVX-512 loads, amxRunBF16AVX). R1GO_AMX_STREAM names one, for A/B runs
// of one binary; BenchmarkTileLayers's variants call it. On the GPU
// machine's Xeon, 2 cores, the first two read a decode step's weights at
// 16.5 and 16.8 GB/s, then 14.8 and 16.3, and their rollouts took turns
// at 396-438 against 376-426 tok/s; prefetching the block after the next
// (12.9, 12.6) or also the tiles two steps ahead into L1 (13.8, 12.9)
// lost (2026-11-26). "avx" waits for a run on the tile unit
// (BenchmarkAMXStream says whether loads beat prefetches there).
func setAMXStream(v string) error {
	stream := amxRunAsm(true)
	switch v {
	case "":
		amxPrefetch = true
	case "nopf":
		amxPrefetch = false
	case "avx":
		amxPrefetch = true
		stream = amxRunWith(amxRunBF16AVX, true)
	default:
		return fmt.Errorf("gemm: R1GO_AMX_STREAM=%q is none of nopf, avx", v)
	}
	if !amxEmulating {
		amxKern[1] = stream
	}
	return nil
}

// amxRunBytes bounds the bytes of B one kernel call takes (at least one
// block, at most amxRunMax): a run is read from memory once and then, for
// A of more than one block, again from L2.
const amxRunBytes = 512 << 10

// amxRunMax is the most blocks one call takes: their sums, 4 KiB a
// block, are written to C after the call.
const amxRunMax = 8

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
	amxProduct(m, full, k, alpha, a16, b, amxRowsSide(ldb), beta, c, ldc, threads)
}

// amxProduct computes C's first full columns (full a multiple of 32) from
// the rounded rows a16 and B, read where bs says. A's blocks go in chunks that
// stay in L2 while every block of B passes them: B is read from memory
// once per chunk (once for a decode batch).
func amxProduct(m, full, k int, alpha float32, a16, b []uint16, bs amxSide, beta float32, c []float32, ldc int, threads int) {
	chunk := max(amxRows, dotBlockBytes/(2*k)/amxRows*amxRows)
	act := getDotScratch((min(m, chunk) + amxRows - 1) / amxRows * amxRows * k)
	defer putDotScratch(act)
	for r0 := 0; r0 < m; r0 += chunk {
		rows := min(chunk, m-r0)
		pk := (*act)[:(rows+amxRows-1)/amxRows*amxRows*k]
		packAMX(a16[r0*k:], rows, k, pk)
		amxChunk(r0, rows, full, k, alpha, pk, b, bs, beta, c, ldc, threads)
	}
}

// amxOut pools the blocks of sums a task writes C from.
var amxOut = sync.Pool{New: func() any { return new([amxRunMax * amxRows * amxRows]float32) }}

// amxChunk computes rows [r0, r0+rows) of C's first full columns from the
// packed rows pk, the threads taking runs of 32-row blocks of B (read
// where bs says): the first block of A streams each run from memory,
// asking for the next as it goes; the others find it in L2.
func amxChunk(r0, rows, full, k int, alpha float32, pk, b []uint16, bs amxSide, beta float32, c []float32, ldc int, threads int) {
	blocksA := (rows + amxRows - 1) / amxRows
	amxTasks(full/amxRows, threads, rows, func(start, end int) {
		ob := amxOut.Get().(*[amxRunMax * amxRows * amxRows]float32)
		defer amxOut.Put(ob)
		call := amxRunArgs{k32: k / 32, ls: bs, out: ob[:], os: amxBlockSums, pfstride: bs.block}
		for run := range amxRuns(start, end, k) {
			call.nb, call.l = run.nb, b[run.j*bs.block:]
			call.pf, call.last = b[run.pf*bs.block:], b[run.last*bs.block:]
			for ib := 0; ib < blocksA; ib++ {
				call.r = pk[ib*amxRows*k:]
				amxKernFor(ib)(&call)
				for q := 0; q < run.nb; q++ {
					// ob's blocks are Cᵀ's: B's rows down, A's across.
					storeCT(ob[q*amxRows*amxRows:], amxRows, amxRows, r0+ib*amxRows, min(amxRows, rows-ib*amxRows), (run.j+q)*amxRows, alpha, beta, c, ldc)
				}
			}
		}
	})
}

// amxTasksPerThread, when positive, replaces tasksPerThread's choice;
// negative, amxTasks splits the blocks in guided tasks (the benchmarks'
// same-run variants).
var amxTasksPerThread = 0

// tasksPerThread is how many tasks amxTasks makes a thread at most, for
// rows of A against B. More tasks even out a thread that starts late or
// is preempted; fewer keep each thread's stream of B in longer runs, each
// task's first block read without a prefetch ahead of it, which counts
// where B streams from memory past one block of A (a decode batch). A
// decode step's products in the tile layout on the GPU machine's Xeon
// (BenchmarkTileLayers, same run): on 2 cores two tasks a thread read
// 26.7 GB/s, eight 24.9 (the small q|k|v and o products 23.5 against
// 19.9); on 16 cores eight read 61.1, two 58.6 (2026-11-26). Longer products (prefill, scoring) are bound by the tile
// unit, where the balance counts: eight.
func tasksPerThread(threads, rows int) int {
	switch {
	case amxTasksPerThread > 0:
		return amxTasksPerThread
	case threads <= 2 && rows <= amxRows:
		return 2
	}
	return 8
}

// amxTasks splits blocks of B among the threads for rows of A, task(start,
// end) taking blocks [start, end), tasksPerThread tasks a thread at most.
func amxTasks(blocks, threads, rows int, task func(start, end int)) {
	if amxTasksPerThread < 0 {
		// Guided (guidedTasks), down to a sixteenth of the product on 2
		// threads: BenchmarkTileLayers' "tg", for the Xeon to say whether
		// it beats two equal tasks a thread.
		starts := guidedTasks(blocks, threads, max(1, blocks/(8*threads)))
		forEach(threads, len(starts)-1, func(t int) { task(starts[t], starts[t+1]) })
		return
	}
	tasks := min(blocks, tasksPerThread(threads, rows)*threads)
	forEach(threads, tasks, func(t int) { task(t*blocks/tasks, (t+1)*blocks/tasks) })
}

// amxRun is one kernel call's blocks of B, [j, j+nb): its first block
// prefetches block pf, its last block last.
type amxRun struct{ j, nb, pf, last int }

// amxRuns yields a task's blocks [start, end) of depth k in runs of at
// most amxRunBytes (and amxRunMax blocks). Each block but the last asks
// for the block after it; the run's last asks for the task's next run,
// or for its own lines: the block after the task is another task's,
// often on another core (prefetched anyway, it cost the down product, 28
// blocks in 16 tasks on 2 cores, 7-15 %, at eight tasks a thread).
func amxRuns(start, end, k int) iter.Seq[amxRun] {
	perRun := min(amxRunMax, max(1, amxRunBytes/(amxRows*2*k)))
	return func(yield func(amxRun) bool) {
		for j := start; j < end; j += perRun {
			r := amxRun{j: j, nb: min(perRun, end-j)}
			r.last = j + r.nb - 1
			if j+r.nb < end {
				r.last = j + r.nb
			}
			r.pf = r.last
			if r.nb > 1 {
				r.pf = j + 1
			}
			if !yield(r) {
				return
			}
		}
	}
}
