package gemm

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/r1go/r1go/internal/pool"
)

// Engine runs SGEMM with one micro-kernel on a fixed or GOMAXPROCS-sized
// set of goroutines. The zero value is not usable; use NewEngine or the
// package-level functions. An Engine is safe for concurrent use.
type Engine struct {
	kern    *kernel
	threads int // 0: runtime.GOMAXPROCS(0) at each call
	// alwaysParallel skips the small-product serial shortcut, so tests
	// reach the parallel path with small shapes.
	alwaysParallel bool
	// noSwap turns off the swapped few-rows path (swap.go), so tests can
	// compare it with the direct one.
	noSwap bool
	// noPrefetchA runs the swapped path with the plain micro-kernel
	// instead of kernel.direct: the benchmarks' same-run before/after.
	noPrefetchA bool
}

// NewEngine returns an engine using the named micro-kernel ("" for the
// fastest available; see Kernels) on threads goroutines (0 for GOMAXPROCS).
func NewEngine(kernelName string, threads int) (*Engine, error) {
	if threads < 0 {
		return nil, fmt.Errorf("gemm: threads = %d, want ≥ 0", threads)
	}
	k := kernels[0]
	if kernelName != "" {
		var err error
		if k, err = kernelNamed(kernelName); err != nil {
			return nil, err
		}
	}
	return &Engine{kern: k, threads: threads}, nil
}

// Kernel names the engine's micro-kernel.
func (e *Engine) Kernel() string { return e.kern.name }

var defaultEngine = &Engine{kern: kernels[0]}

// Sgemm computes C = alpha·op(A)·op(B) + beta·C with the default engine.
// See Engine.Sgemm.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	defaultEngine.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SgemmStridedBatched runs batch independent Sgemm calls with the default
// engine. See Engine.SgemmStridedBatched.
func SgemmStridedBatched(transA, transB bool, m, n, k int, alpha float32, a []float32, lda, strideA int, b []float32, ldb, strideB int, beta float32, c []float32, ldc, strideC int, batch int) {
	defaultEngine.SgemmStridedBatched(transA, transB, m, n, k, alpha, a, lda, strideA, b, ldb, strideB, beta, c, ldc, strideC, batch)
}

// Sgemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices:
// op(A) is m×k, op(B) is k×n, C is m×n. op(X) is X, or Xᵀ when transX is
// set, so A is stored m×k (k×m when transposed) with row pitch lda, B is
// stored k×n (n×k when transposed) with row pitch ldb, and C has row pitch
// ldc. When beta is 0, C is not read. Panics if a dimension is negative or a
// matrix does not fit its slice.
func (e *Engine) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkArgs(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	j := job{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc}
	if e.useSmall(&j) {
		e.small(&j, e.smallThreads(m, n, k))
		return
	}
	if e.useSwap(&j) {
		e.swapped(&j)
		return
	}
	e.run(&j, e.threadsFor(m, n, k))
}

// SgemmStridedBatched computes, for i < batch, C_i = alpha·op(A_i)·op(B_i)
// + beta·C_i where X_i starts at offset i·strideX of x (the attention
// scores and context products, one per head). Small batched problems run
// one whole product per goroutine.
func (e *Engine) SgemmStridedBatched(transA, transB bool, m, n, k int, alpha float32, a []float32, lda, strideA int, b []float32, ldb, strideB int, beta float32, c []float32, ldc, strideC int, batch int) {
	if batch < 0 || strideA < 0 || strideB < 0 || strideC < 0 {
		panic(fmt.Sprintf("gemm: batch %d with strides %d, %d, %d: want all ≥ 0", batch, strideA, strideB, strideC))
	}
	if batch == 0 {
		return
	}
	sub := func(x []float32, i, stride int) []float32 {
		if i*stride > len(x) {
			panic(fmt.Sprintf("gemm: batch %d starts at %d, past the slice's %d elements", i, i*stride, len(x)))
		}
		return x[i*stride:]
	}
	for i := 0; i < batch; i++ { // validate everything before writing anything
		checkArgs(transA, transB, m, n, k, sub(a, i, strideA), lda, sub(b, i, strideB), ldb, sub(c, i, strideC), ldc)
	}
	threads := e.threadsFor(m, n, k*batch)
	if threads == 1 || batch < threads {
		for i := 0; i < batch; i++ {
			e.Sgemm(transA, transB, m, n, k, alpha, a[i*strideA:], lda, b[i*strideB:], ldb, beta, c[i*strideC:], ldc)
		}
		return
	}
	single := &Engine{kern: e.kern, threads: 1}
	forEach(threads, batch, func(i int) {
		single.Sgemm(transA, transB, m, n, k, alpha, a[i*strideA:], lda, b[i*strideB:], ldb, beta, c[i*strideC:], ldc)
	})
}

func checkArgs(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm: negative dimension m=%d n=%d k=%d", m, n, k))
	}
	rowsA, colsA := m, k
	if transA {
		rowsA, colsA = k, m
	}
	rowsB, colsB := k, n
	if transB {
		rowsB, colsB = n, k
	}
	checkMatrix("A", a, rowsA, colsA, lda)
	checkMatrix("B", b, rowsB, colsB, ldb)
	checkMatrix("C", c, m, n, ldc)
}

func checkMatrix(name string, x []float32, rows, cols, ld int) {
	if ld < max(1, cols) {
		panic(fmt.Sprintf("gemm: leading dimension of %s is %d, want ≥ %d", name, ld, max(1, cols)))
	}
	if rows > 0 && cols > 0 && (rows-1)*ld+cols > len(x) {
		panic(fmt.Sprintf("gemm: %s is %d×%d with leading dimension %d, needs %d elements, slice has %d",
			name, rows, cols, ld, (rows-1)*ld+cols, len(x)))
	}
}

// scaleC sets C = beta·C, writing zeros without reading C when beta is 0.
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		if beta != 1 {
			for j := range row {
				row[j] *= beta
			}
		}
	}
}

// minParallelFlops is the product size below which goroutine start-up costs
// more than a second core gains.
const minParallelFlops = 4 << 20

func (e *Engine) threadsFor(m, n, k int) int {
	t := e.threads
	if t == 0 {
		t = runtime.GOMAXPROCS(0)
	}
	if 2*float64(m)*float64(n)*float64(k) < minParallelFlops && !e.alwaysParallel {
		return 1
	}
	return t
}

// minParallelBytes is the size of the wide operand above which the
// few-rows path splits over threads: that path streams the operand once
// and is bound by memory and by the dot kernel's per-row overhead, not by
// flops, so a decode projection of a megabyte gains from a second core
// although its flop count is below minParallelFlops.
const minParallelBytes = 256 << 10

// smallThreads is threadsFor for the few-rows and few-columns path.
func (e *Engine) smallThreads(m, n, k int) int {
	if 4*float64(max(m, n))*float64(k) >= minParallelBytes {
		t := e.threads
		if t == 0 {
			t = runtime.GOMAXPROCS(0)
		}
		return t
	}
	return e.threadsFor(m, n, k)
}

type job struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a              []float32
	lda            int
	b              []float32
	ldb            int
	c              []float32
	ldc            int
	// directA: the micro-kernel reads full micro-panels of a
	// non-transposed A in place (row pitch lda) instead of packed copies;
	// only a last partial panel is packed (swap.go).
	directA bool
	// prefetchA: directA tiles use kernel.direct (prefetching the next
	// tile's rows of A) where the kernel has one.
	prefetchA bool
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// depthSlice is the depth of a product's slices of k, at most about kc:
// equal slices, since each costs one pass over C and a thin last slice
// (k = 896 as 512+384) pays a whole pass for little work. Every path that
// must give run's sums (the swapped path) slices k with it.
func depthSlice(k, kc int) int { return ceilDiv(ceilDiv(k, ceilDiv(k, kc)), 8) * 8 }

// forEach runs body(i) for every i < n on up to threads goroutines that take
// the next index as they finish the last one, so a thread the OS preempts
// (the machine is shared) or an uneven item slows the call by one item at
// most, not by its whole share. The goroutines are package pool's, awake
// between calls.
func forEach(threads, n int, body func(i int)) {
	pool.For(threads, n, body)
}

// guidedTasks splits n units into tasks for threads taking them in order
// (forEach): each task a 1/(2·threads) share of what the ones before it
// left, but at least minUnits (the last: what remains). The first tasks
// are long, each one contiguous stream of B; the last are short, so that
// the threads finish close together: with equal tasks the one that ends a
// product can start when the other thread has most of a task left, and
// the caller waits that long (pool.TimeJoins: about 3 % of a bf16 decode
// step's products with sixteen tasks on 2 cores of the Zen 4 VM). It
// returns the starts of the tasks, then n.
func guidedTasks(n, threads, minUnits int) []int {
	starts := []int{0}
	for s := 0; s < n; {
		s = min(n, s+max(minUnits, ceilDiv(n-s, 2*threads)))
		starts = append(starts, s)
	}
	return starts
}

// run is the blocked product. For each NC-wide column block of op(B) and
// each KC-deep slice, the threads first pack that KC×NC block of op(B) and an
// MB×KC block of op(A) together (one micro-panel per item), then multiply
// them tile group by tile group: a task is a run of A micro-panels against a
// chunk of B micro-panels small enough to stay in one core's L2.
func (e *Engine) run(j *job, threads int) {
	kn := e.kern.forRows(j.m)
	mr, nr := kn.mr, kn.nr
	kcEq := depthSlice(j.k, kn.kc)
	kcs := kcStride(kcEq)
	lay := layout{kcs: kcs, panelA: mr * kcs, panelB: kcEq * nr}
	mb := min(kn.mb, ceilDiv(j.m, mr)*mr)
	ncb := ceilDiv(ceilDiv(j.n, ceilDiv(j.n, kn.nc)), nr) * nr // equal column blocks ≤ NC
	ablock := getScratch(&aScratch, ceilDiv(mb, mr)*lay.panelA)
	bblock := getScratch(&bScratch, ceilDiv(ncb, nr)*lay.panelB)
	defer putScratch(&aScratch, ablock)
	defer putScratch(&bScratch, bblock)
	sp, sr := aStrides(j.transA, mr, kcs)

	for j0 := 0; j0 < j.n; j0 += ncb {
		ncur := min(ncb, j.n-j0)
		panelsN := ceilDiv(ncur, nr)
		chunk := min(max(1, kn.nb/nr), panelsN) // B micro-panels per task
		chunks := ceilDiv(panelsN, chunk)
		for p0 := 0; p0 < j.k; p0 += kcEq {
			kc := min(kcEq, j.k-p0)
			beta := j.beta
			if p0 > 0 {
				beta = 1 // later depth slices add to what the first wrote
			}
			for i0 := 0; i0 < j.m; i0 += mb {
				mcur := min(mb, j.m-i0)
				panelsM := ceilDiv(mcur, mr)
				packsB := 0
				if i0 == 0 {
					packsB = panelsN // the B block serves every row block
				}
				forEach(threads, panelsM+packsB, func(q int) {
					if q < panelsM {
						packA(j.transA, mr, j.a, j.lda, i0+q*mr, min(mr, mcur-q*mr), p0, kc, kcs, ablock.data[q*lay.panelA:(q+1)*lay.panelA])
						return
					}
					q -= panelsM
					col := j0 + q*nr
					packB(kn, j.transB, j.b, j.ldb, p0, kc, col, min(nr, j.n-col), bblock.data[q*lay.panelB:(q+1)*lay.panelB])
				})
				// Enough row groups for about four tasks per thread.
				groups := min(panelsM, max(1, ceilDiv(4*threads, chunks)))
				forEach(threads, groups*chunks, func(t int) {
					g, c := t%groups, t/groups
					tile(kn, j, lay, ablock.data, bblock.data, i0, j0, g*panelsM/groups, (g+1)*panelsM/groups,
						c*chunk, min(panelsN, (c+1)*chunk), ncur, p0, kc, sp, sr, beta)
				})
			}
		}
	}
}

// layout is the packed micro-panel geometry of one call, in floats.
type layout struct {
	kcs    int // row pitch of a non-transposed A micro-panel
	panelA int // one A micro-panel
	panelB int // one B micro-panel
}

// tile multiplies, with kernel kn, packed A micro-panels [qa0, qa1) (C rows from i0) by
// packed B micro-panels [qb0, qb1) (C columns from j0; the block is ncur
// wide), one MR×NR tile per micro-kernel call.
func tile(kn *kernel, j *job, lay layout, apack, bpack []float32, i0, j0, qa0, qa1, qb0, qb1, ncur, p0, kc int, sp, sr uintptr, beta float32) {
	mr, nr := kn.mr, kn.nr
	// Scratch tile for partial tiles (≥ mr·nr of every kernel), from a pool:
	// a local array would move to the heap on every call (the kernel is
	// called through a function value, so escape analysis cannot see that
	// it keeps no pointer) and the 4 KiB per call added up to most of the
	// allocations of a training step.
	var edge *[16 * 64]float32
	defer func() {
		if edge != nil {
			edgePool.Put(edge)
		}
	}()
	ldc := uintptr(j.ldc) * 4
	for qa := qa0; qa < qa1; qa++ {
		row := i0 + qa*mr
		rows := min(mr, j.m-row)
		var ap *float32
		asp, asr := sp, sr
		micro := kn.micro
		if j.directA && rows == mr {
			ap, asp, asr = &j.a[row*j.lda+p0], 4, uintptr(j.lda)*4
			if j.prefetchA && kn.direct != nil {
				micro = kn.direct
			}
		} else {
			ap = &apack[qa*lay.panelA]
		}
		for qb := qb0; qb < qb1; qb++ {
			col := j0 + qb*nr
			cols := min(nr, j0+ncur-col)
			bp := &bpack[qb*lay.panelB]
			if rows == mr && cols == nr {
				micro(kc, ap, asp, asr, bp, &j.c[row*j.ldc+col], ldc, j.alpha, beta)
				continue
			}
			if edge == nil {
				edge = edgePool.Get().(*[16 * 64]float32)
			}
			micro(kc, ap, asp, asr, bp, &edge[0], uintptr(nr)*4, 1, 0)
			mergeEdge(edge[:mr*nr], nr, rows, cols, j.alpha, beta, j.c[row*j.ldc+col:], j.ldc)
		}
	}
}

var edgePool = sync.Pool{New: func() any { return new([16 * 64]float32) }}

// mergeEdge writes C = alpha·t + beta·C for the rows×cols corner of a tile t.
func mergeEdge(t []float32, nr, rows, cols int, alpha, beta float32, c []float32, ldc int) {
	for r := 0; r < rows; r++ {
		src := t[r*nr : r*nr+cols]
		dst := c[r*ldc : r*ldc+cols]
		if beta == 0 {
			for i, v := range src {
				dst[i] = alpha * v
			}
			continue
		}
		for i, v := range src {
			dst[i] = alpha*v + beta*dst[i]
		}
	}
}
