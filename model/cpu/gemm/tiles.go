package gemm

import (
	"fmt"
	"runtime"
)

// The tile layout of a bf16 weight matrix: the AMX path's products with
// the weights stored the way the tile unit reads its second operand.
//
// sgemmAMX reads B (the weights) in place, as the left operand: each tile
// is 16 rows of B, 64 bytes of each, so a step of depth touches 16 cache
// lines 2·ldb bytes apart, and the tiles of sums come out as Cᵀ, which the
// 8 × 8 transpose writes back into C. A weight matrix that is rounded once
// and read at every decode step (a rollout copy's) can instead be stored
// ready for the right operand: in each block of 32 rows, each half of 16
// rows in packPairs's form (the 16 rows' bf16 pair p side by side at
// 32-bit words 16p to 16p+15). Then A, a decode batch of 32 rows, is the
// left operand, read in place from L1; a run of blocks of B is one stream
// of whole tiles; and the tiles of sums are rows of C, stored where they
// belong with no transpose. On the GPU machine's Xeon this way read a
// decode step's weights from memory at 1.17-1.29 × the speed of B in
// place on 2 cores and 1.19 × on 16 (BenchmarkDotBF16Stream, amx-direct
// against amx; 2026-11-26, the Xeon host).
//
// Each sum is the tile instruction's over the same pairs in the same
// order as sgemmAMX's, with the operands' roles swapped (a product of two
// bf16 values is exact in float32): the results are the same bits. A
// matrix whose row count is not a multiple of 32 keeps its last n%32 rows
// as they were, which the vector kernels take.

// TileLayout says whether SgemmTileBF16TransB runs here: a caller keeps a
// matrix in the tile layout only then (elsewhere the vector kernels read
// plain rows).
func TileLayout() bool {
	on, _ := HasAMX()
	return on
}

// tileHalf is the values of one half of a block in the tile layout.
func tileHalf(k int) int { return amxRows / 2 * k }

// PackTileBF16 rearranges the bf16 matrix b (n rows of k values, k apart,
// k a multiple of 32) in place into the tile layout, on up to threads
// goroutines.
func PackTileBF16(b []uint16, n, k int, threads int) {
	checkTileShape("PackTileBF16", b, n, k)
	halves := n / amxRows * 2
	forEach(threads, halves, func(h int) {
		half := b[h*tileHalf(k):][:tileHalf(k)]
		rows := getDotScratch(tileHalf(k))
		copy(*rows, half)
		packPairs(*rows, k, amxRows/2, amxRows/2, half)
		putDotScratch(rows)
	})
}

// TileRowBF16 copies row r of t, a matrix of n rows of k values in the
// tile layout, into dst (k values).
func TileRowBF16(dst, t []uint16, n, k, r int) {
	if r < 0 || r >= n || len(dst) < k {
		panic(fmt.Sprintf("gemm: row %d of a %d-row matrix in the tile layout into %d values (k %d)", r, n, k, len(dst)))
	}
	if full := n / amxRows * amxRows; r >= full {
		copy(dst[:k], t[r*k:][:k])
		return
	}
	half := t[r/16*tileHalf(k):][:tileHalf(k)]
	lane := r % 16
	for p := 0; p < k/2; p++ {
		dst[2*p] = half[32*p+2*lane]
		dst[2*p+1] = half[32*p+2*lane+1]
	}
}

func checkTileShape(op string, b []uint16, n, k int) {
	if n < 0 || k <= 0 || k%DotBF16Step != 0 || len(b) < n*k {
		panic(fmt.Sprintf("gemm: %s of %d values as %d rows of %d (k must be a positive multiple of %d)", op, len(b), n, k, DotBF16Step))
	}
}

// SgemmTileBF16TransB computes C = alpha·A·Bᵀ + beta·C for A [m, k]
// float32 (row pitch lda) rounded to bf16, B [n, k] bf16 in the tile
// layout (PackTileBF16) and C [m, n] (row pitch ldc), on up to threads
// goroutines (0: GOMAXPROCS): the same bits as SgemmDotBF16TransB on the
// AMX path with B in rows. It returns false, doing nothing, where the
// AMX path is off. beta = 0 never reads C.
func SgemmTileBF16TransB(m, n, k int, alpha float32, a []float32, lda int, b []uint16, beta float32, c []float32, ldc int, threads int) bool {
	if m < 0 || lda < k || ldc < n {
		panic(fmt.Sprintf("gemm: bf16 tile-layout product m=%d n=%d k=%d with lda=%d ldc=%d", m, n, k, lda, ldc))
	}
	checkTileShape("SgemmTileBF16TransB", b, n, k)
	if !TileLayout() {
		return false
	}
	if m == 0 || n == 0 {
		return true
	}
	if len(a) < (m-1)*lda+k || len(c) < (m-1)*ldc+n {
		panic("gemm: bf16 tile-layout product operands shorter than their shapes")
	}
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	// A is the left operand, 32 rows a block: padded with zero rows to a
	// multiple of 32.
	sa := roundRowsBF16(m, k, a, lda, amxRows, threads)
	defer putDotScratch(sa)
	a16 := *sa
	full := n / amxRows * amxRows
	if full < n {
		dotRows(m, n-full, k, alpha, a16, b[full*k:], k, beta, c[full:], ldc, threads)
	}
	// Blocks of A that stay in L2 while every run of B passes them, as
	// amxProduct's chunks: B is read from memory once per chunk.
	chunk := max(amxRows, dotBlockBytes/(2*k)/amxRows*amxRows)
	for r0 := 0; r0 < m && full > 0; r0 += chunk {
		tileChunk(r0, min(chunk, m-r0), full, k, alpha, a16[r0*k:], b, beta, c, ldc, threads)
	}
	return true
}

// amxDirectSums is C itself, ldc apart, as the sums of a block of A on
// the left and a run of B on the right.
func amxDirectSums(ldc int) amxSums { return amxSums{ldc, 16 * ldc, amxRows} }

// tileSums is where tileChunk's kernel calls write a block of A's sums
// that cannot go straight into C (a last block of fewer than 32 rows, or
// alpha and beta to apply): a run's blocks side by side, 32 rows.
var tileSums = amxSums{pitch: amxRunMax * amxRows, half: 16 * amxRunMax * amxRows, block: amxRows}

// tileChunk computes rows [r0, r0+rows) of C's first full columns from
// a16 (those rows rounded, k apart, padded to whole blocks of 32), the
// threads taking runs of 32-row blocks of B in the tile layout: the first
// block of A streams each run from memory, asking for the next as it
// goes; the others find it in L2.
func tileChunk(r0, rows, full, k int, alpha float32, a16, b []uint16, beta float32, c []float32, ldc int, threads int) {
	blocksA := ceilDiv(rows, amxRows)
	block := amxRows * k
	amxTasks(full/amxRows, threads, rows, func(start, end int) {
		ob := amxOut.Get().(*[amxRunMax * amxRows * amxRows]float32)
		defer amxOut.Put(ob)
		call := amxRunArgs{k32: k / 32, ls: amxSide{k, 32, 16 * k, 0}, rblock: block, pfstride: block}
		for run := range amxRuns(start, end, k) {
			call.nb, call.r = run.nb, b[run.j*block:]
			call.pf, call.last = b[run.pf*block:], b[run.last*block:]
			for ib := range blocksA {
				call.l = a16[ib*block:]
				i0, nr := r0+ib*amxRows, min(amxRows, rows-ib*amxRows)
				if nr == amxRows && alpha == 1 && beta == 0 {
					// A whole block of a plain product: the sums are C's.
					call.out, call.os = c[i0*ldc+run.j*amxRows:], amxDirectSums(ldc)
					amxKernFor(ib)(&call)
					continue
				}
				call.out, call.os = ob[:], tileSums
				amxKernFor(ib)(&call)
				for i := range nr {
					cr := c[(i0+i)*ldc+run.j*amxRows:][:run.nb*amxRows]
					for j, s := range ob[i*tileSums.pitch:][:len(cr)] {
						cr[j] = scaleSum(s, alpha, beta, cr[j])
					}
				}
			}
		}
	})
}

// scaleSum is alpha·s + beta·c, with c not read when beta is 0 and s
// kept as it is for a plain product: the one formula of every path that
// writes C from blocks of sums, so that they agree to the bit.
func scaleSum(s, alpha, beta, c float32) float32 {
	if alpha != 1 || beta != 0 {
		s *= alpha
		if beta != 0 {
			s += beta * c
		}
	}
	return s
}
