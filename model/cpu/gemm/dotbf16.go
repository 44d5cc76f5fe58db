package gemm

import (
	"fmt"
	"runtime"
	"sync"
)

// The bf16 dot-product path: C = alpha·A·Bᵀ + beta·C with B stored as
// bfloat16 [n, k] (a rollout copy's weights) and A float32 rounded to
// bf16 (to nearest even) before the products, which the CPU's AVX512_BF16
// dot product (VDPBF16PS) sums in float32: 32 multiply-adds per
// instruction, twice the float32 FMA rate of the same core. The results
// differ from the exact path (SgemmBF16TransB, which widens B and keeps A
// float32) by the rounding of A: at most 2⁻⁹ of each product's size. A
// model opts in for its weights (model.LoadOptions.BF16Products): a
// rollout samples from the bf16 copy as vLLM would, while a reference
// policy keeps exact products.

// HasDotBF16 says whether the CPU (and this build) has the bf16 dot
// product kernels.
func HasDotBF16() bool { return hasDotBF16 }

// DotBF16Step is the multiple of k the dot path takes: shorter or ragged
// rows go to the exact path.
const DotBF16Step = 32

// SgemmDotBF16TransB computes C = alpha·A·Bᵀ + beta·C for A [m, k] (row
// pitch lda), B [n, k] bf16 (row pitch ldb) and C [m, n] (row pitch ldc)
// with A rounded to bf16, on up to threads goroutines (0: GOMAXPROCS). It
// returns false, doing nothing, where the dot path does not apply (no
// AVX512_BF16, or k not a multiple of DotBF16Step). beta = 0 never reads
// C.
func SgemmDotBF16TransB(m, n, k int, alpha float32, a []float32, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int, threads int) bool {
	if m < 0 || n < 0 || k < 0 || lda < k || ldb < k || ldc < n {
		panic(fmt.Sprintf("gemm: bf16 dot product m=%d n=%d k=%d with lda=%d ldb=%d ldc=%d", m, n, k, lda, ldb, ldc))
	}
	if !hasDotBF16 || k == 0 || k%DotBF16Step != 0 {
		return false
	}
	if m == 0 || n == 0 {
		return true
	}
	if len(a) < (m-1)*lda+k || len(b) < (n-1)*ldb+k || len(c) < (m-1)*ldc+n {
		panic("gemm: bf16 dot product operands shorter than their shapes")
	}
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	sa := roundRowsBF16(m, k, a, lda, 8, threads)
	defer putDotScratch(sa)
	a16 := *sa
	switch bf16Kernel(m) {
	case "amx":
		sgemmAMX(m, n, k, alpha, a16, b, ldb, beta, c, ldc, threads)
	case "panels":
		dotPanels(m, n, k, alpha, a16, b, ldb, beta, c, ldc, threads)
	default:
		dotRows(m, n, k, alpha, a16, b, ldb, beta, c, ldc, threads)
	}
	return true
}

// roundRowsBF16 returns A rounded to bf16 once, in rows of k padded with
// zero rows to a multiple of pad, itself a multiple of eight (the tile
// kernel's tile is four rows, packPairs takes eight, the tile layout's
// products 32), shared by every thread; putDotScratch takes it back.
func roundRowsBF16(m, k int, a []float32, lda int, pad int, threads int) *[]uint16 {
	mp := ceilDiv(m, pad) * pad
	sa := getDotScratch(mp * k)
	a16 := *sa
	forEach(threads, mp/8, func(t int) {
		for i := t * 8; i < t*8+8; i++ {
			row := a16[i*k : (i+1)*k]
			if i >= m {
				clear(row)
				continue
			}
			cvtBF16(k/32, &a[i*lda], &row[0])
		}
	})
	return sa
}

// dotRows is the tile kernel's product from the rounded rows a16 (k
// apart, padded with zero rows to a multiple of four).
func dotRows(m, n, k int, alpha float32, a16, b []uint16, ldb int, beta float32, c []float32, ldc int, threads int) {
	// Rows of A in blocks that stay in L2 while every tile of B passes
	// them: B is read from memory once per block (once for a decode batch).
	block := max(4, dotBlockBytes/(2*k)&^3)
	for i0 := 0; i0 < m; i0 += block {
		dotBlock(i0, min(m, i0+block), n, k, alpha, a16, b, ldb, beta, c, ldc, threads)
	}
}

// dotBlockBytes bounds the rounded A rows of one block (half of a 1 MiB L2).
const dotBlockBytes = 512 << 10

// dotBlock computes rows [i0, i1) of C from the rounded rows a16 (k apart),
// the threads taking tiles of four B rows.
func dotBlock(i0, i1, n, k int, alpha float32, a16, b []uint16, ldb int, beta float32, c []float32, ldc int, threads int) {
	tiles := ceilDiv(n, 4)
	per := max(8, ceilDiv(tiles, 8*threads))
	mt := ceilDiv(i1-i0, 4) // row tiles of this block
	forEach(threads, ceilDiv(tiles, per), func(t int) {
		ob := getScratch(&dotOut, 16*mt)
		defer putScratch(&dotOut, ob)
		out := ob.data
		var tail *[]uint16 // the last tile's B rows padded with zero rows
		defer func() {
			if tail != nil {
				putDotScratch(tail)
			}
		}()
		for g := t * per; g < min(tiles, (t+1)*per); g++ {
			j0 := g * 4
			nw := min(4, n-j0)
			bt, ldt := b[j0*ldb:], ldb
			if nw < 4 {
				tail = getDotScratch(4 * k)
				bt, ldt = *tail, k
				for r := 0; r < 4; r++ {
					row := bt[r*k : (r+1)*k]
					if r < nw {
						copy(row, b[(j0+r)*ldb:(j0+r)*ldb+k])
					} else {
						clear(row)
					}
				}
			}
			pf := &bt[0] // the next tile's rows, prefetched meanwhile (this one's for the last)
			if next := (g + 1) * 4; next+4 <= n {
				pf = &b[next*ldb]
			}
			// Whole tiles of a plain product go straight into C; the rest
			// (alpha, beta, a ragged last tile of rows or columns) through
			// out, four floats a row.
			i := i0
			if full := (i1 - i0) / 4; alpha == 1 && beta == 0 && nw == 4 && full > 0 {
				dotTileBF16(k/32, full, &a16[i0*k], uintptr(2*k), &bt[0], uintptr(2*ldt), &c[i0*ldc+j0], uintptr(4*ldc), pf)
				i += 4 * full
			}
			if i == i1 {
				continue
			}
			r0 := i
			dotTileBF16(k/32, ceilDiv(i1-r0, 4), &a16[r0*k], uintptr(2*k), &bt[0], uintptr(2*ldt), &out[0], 16, pf)
			for ; i < i1; i++ {
				o := out[(i-r0)*4:]
				cr := c[i*ldc+j0 : i*ldc+j0+nw]
				if alpha == 1 && beta == 0 {
					copy(cr, o)
					continue
				}
				for r := range cr {
					s := alpha * o[r]
					if beta != 0 {
						s += beta * cr[r]
					}
					cr[r] = s
				}
			}
		}
	})
}

// dotOut pools dotBlock's tasks' tiles of sums: allocated afresh, they
// were thousands of small allocations a decode step.
var dotOut sync.Pool

// dotScratch pools the rounded A rows and padded B tiles.
var dotScratch sync.Pool

func getDotScratch(n int) *[]uint16 {
	if p, ok := dotScratch.Get().(*[]uint16); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]uint16, n)
	return &s
}

func putDotScratch(p *[]uint16) { dotScratch.Put(p) }
