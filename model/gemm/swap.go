package gemm

import "sync"

// A few dozen rows against a transposed B: a batch of decode rows times a
// weight matrix W stored [n, k], C = A·Wᵀ. Packing op(B) = Wᵀ transposes the
// whole weight, 8×8 block by block, for only m uses of each element: in a
// batch-32 decode step of a 0.5B model the transposes took as long as the
// products. The swapped path computes Cᵀ = W·Aᵀ instead: W is now op(A),
// not transposed, which the micro-kernel reads in place (its A operand is
// addressed through two strides; only a last partial panel is packed), and
// the few rows of A are the transposed operand, cheap to pack: W is read
// once and never copied. Cᵀ lands in a scratch and is
// transposed into C (m·n floats, against the n·k of W).
//
// Every element is the same sum in the same order: the depth slices depend
// on k only, and within a slice each element accumulates a·b (which equals
// b·a) over p in order with the same kernel arithmetic; alpha is applied
// the same way. So the result is bit for bit the direct path's (tested).
// beta must be 0: C is written, not read.

// swapMaxRows and swapMinCols bound the products that take the swapped
// path: above a few dozen rows the transposes are amortised, and a narrow
// W is no weight matrix.
const (
	swapMaxRows = 64
	swapMinCols = 256
)

// cScratch pools the swapped path's Cᵀ buffers.
var cScratch sync.Pool

func (e *Engine) useSwap(j *job) bool {
	return !e.noSwap && j.transB && !j.transA && j.beta == 0 &&
		j.m > smallRows && j.m <= swapMaxRows && j.n >= swapMinCols
}

func (e *Engine) swapped(j *job) {
	s := getScratch(&cScratch, j.n*j.m)
	defer putScratch(&cScratch, s)
	t := job{transA: false, transB: true, m: j.n, n: j.m, k: j.k, alpha: j.alpha, beta: 0,
		a: j.b, lda: j.ldb, b: j.a, ldb: j.lda, c: s.data, ldc: j.m, directA: true, prefetchA: !e.noPrefetchA}
	threads := e.threadsFor(t.m, t.n, t.k)
	e.run(&t, threads)
	// C[i][c] = Cᵀ[c][i], in blocks of 64 columns of C for locality, split
	// over the threads when large (a batch-32 LM head is 4.9 M values: on
	// one core, the other would idle for milliseconds every decode step).
	const blk = 64
	blocks := ceilDiv(j.n, blk)
	if j.m*j.n < swapParallelCopy {
		threads = 1
	}
	parts := min(threads, blocks)
	forEach(parts, parts, func(p int) {
		for c0 := p * blocks / parts * blk; c0 < min((p+1)*blocks/parts*blk, j.n); c0 += blk {
			c1 := min(c0+blk, j.n)
			for i := 0; i < j.m; i++ {
				row := j.c[i*j.ldc : i*j.ldc+j.n]
				for c := c0; c < c1; c++ {
					row[c] = s.data[c*j.m+i]
				}
			}
		}
	})
}

// swapParallelCopy is the size of C from which the swapped path copies Cᵀ
// back on every thread.
const swapParallelCopy = 1 << 16
