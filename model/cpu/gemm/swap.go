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
	// C[i][c] = Cᵀ[c][i], a row panel of Cᵀ at a time as soon as its last
	// depth slice is summed, while it is still in L1: a separate pass
	// afterwards read all of Cᵀ back from memory (a batch-32 LM head's is
	// 19 MB) and took 5 % of a decode step.
	// Eight rows of Cᵀ at a time go through the 8 × 8 block transpose
	// where there is one.
	m, ldc := j.m, j.ldc
	tr8 := e.kern.forRows(t.m).tr8
	e.runDirect(&t, threads, func(row, rows int) {
		r := 0
		if tr8 != nil && m%8 == 0 {
			for ; r+8 <= rows; r += 8 {
				_ = j.c[(m-1)*ldc+row+r+7] // C's rows 0..m-1 at columns row+r .. +7
				tr8(&s.data[(row+r)*m], uintptr(4*m), &j.c[row+r], uintptr(4*ldc), m/8)
			}
		}
		for i := 0; i < m; i++ {
			dst := j.c[i*ldc+row+r : i*ldc+row+rows]
			for q := range dst {
				dst[q] = s.data[(row+r+q)*m+i]
			}
		}
	})
}

// runDirect is run for the swapped path's product Cᵀ = W·Aᵀ, with W read
// in place: every depth slice of the few columns of op(B) is packed first
// (32 × k floats), then each task takes a run of W's row panels and,
// panel by panel, all depth slices in order, calling done(row, rows) when
// the panel's rows of C are final. Each element's sum is run's
// (the same slices, the same order, beta 1 after the first slice), but W's
// rows are read start to end while their tile of Cᵀ stays in L1, and the
// threads meet once per product instead of once per depth slice and row
// block: with run's order a batch-32 decode product gained 1.45× from a
// second core, with this one 1.7-1.9×, and one core ran 10 % faster.
func (e *Engine) runDirect(j *job, threads int, done func(row, rows int)) {
	kn := e.kern.forRows(j.m)
	mr, nr := kn.mr, kn.nr
	kcEq := depthSlice(j.k, kn.kc)
	kcs := kcStride(kcEq)
	lay := layout{kcs: kcs, panelA: mr * kcs, panelB: kcEq * nr}
	slices, panelsN, panelsM := ceilDiv(j.k, kcEq), ceilDiv(j.n, nr), ceilDiv(j.m, mr)
	bblock := getScratch(&bScratch, slices*panelsN*lay.panelB)
	defer putScratch(&bScratch, bblock)
	forEach(threads, slices*panelsN, func(q int) {
		s, qb := q/panelsN, q%panelsN
		col := qb * nr
		packB(kn, j.transB, j.b, j.ldb, s*kcEq, min(kcEq, j.k-s*kcEq), col, min(nr, j.n-col), bblock.data[q*lay.panelB:(q+1)*lay.panelB])
	})
	sp, sr := aStrides(false, mr, kcs)
	// About eight tasks per thread: a preempted thread (a shared machine)
	// delays the product by one eighth of its share.
	groups := min(panelsM, 8*threads)
	forEach(threads, groups, func(g int) {
		var partial *scratch // the last row panel when it has fewer than mr rows
		defer func() {
			if partial != nil {
				putScratch(&aScratch, partial)
			}
		}()
		for qa := g * panelsM / groups; qa < (g+1)*panelsM/groups; qa++ {
			row := qa * mr
			rows := min(mr, j.m-row)
			for s := 0; s < slices; s++ {
				p0 := s * kcEq
				kc := min(kcEq, j.k-p0)
				beta := j.beta
				if s > 0 {
					beta = 1
				}
				var apack []float32
				if rows < mr {
					if partial == nil {
						partial = getScratch(&aScratch, lay.panelA)
					}
					apack = partial.data[:lay.panelA]
					packA(false, mr, j.a, j.lda, row, rows, p0, kc, kcs, apack)
				}
				bp := bblock.data[s*panelsN*lay.panelB : (s+1)*panelsN*lay.panelB]
				tile(kn, j, lay, apack, bp, row, 0, 0, 1, 0, panelsN, j.n, p0, kc, sp, sr, beta)
			}
			done(row, rows)
		}
	})
}
