package gemm

import (
	"fmt"
	"runtime"
	"sync"
)

// Engine runs SGEMM with one micro-kernel on a fixed or GOMAXPROCS-sized
// set of goroutines. The zero value is not usable; use NewEngine or the
// package-level functions. An Engine is safe for concurrent use.
type Engine struct {
	kern    *kernel
	threads int // 0: runtime.GOMAXPROCS(0) at each call
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
	parallelFor(threads, func(t int) {
		for i := t * batch / threads; i < (t+1)*batch/threads; i++ {
			single.Sgemm(transA, transB, m, n, k, alpha, a[i*strideA:], lda, b[i*strideB:], ldb, beta, c[i*strideC:], ldc)
		}
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
	if 2*float64(m)*float64(n)*float64(k) < minParallelFlops {
		return 1
	}
	return t
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
}

// grid splits threads into tm row groups × tn column groups so the busiest
// thread has the fewest tiles; ties go to more column groups, which share
// the packed A block instead of packing B twice.
func grid(threads, panelsM, panelsN int) (tm, tn int) {
	best := -1
	for d := 1; d <= threads; d++ {
		if threads%d != 0 {
			continue
		}
		rows, cols := threads/d, d
		load := ceilDiv(panelsM, rows) * ceilDiv(panelsN, cols)
		if best < 0 || load <= best {
			best, tm, tn = load, rows, cols
		}
	}
	return tm, tn
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// parallelFor runs body(0..threads-1) concurrently and waits for all.
func parallelFor(threads int, body func(t int)) {
	if threads == 1 {
		body(0)
		return
	}
	var wg sync.WaitGroup
	wg.Add(threads - 1)
	for t := 1; t < threads; t++ {
		go func() {
			defer wg.Done()
			body(t)
		}()
	}
	body(0)
	wg.Wait()
}

// run is the blocked, parallel product. For each MB×KC block of op(A):
// all threads pack its micro-panels together, then each thread packs KC×NB
// blocks of its own columns of op(B) and sweeps the A micro-panels against
// them.
func (e *Engine) run(j *job, threads int) {
	kn := e.kern
	mr, nr := kn.mr, kn.nr
	kcs := kcStride(kn.kc)
	panelA := mr * kcs // floats per packed A micro-panel
	mb := min(kn.mb, ceilDiv(j.m, mr)*mr)
	ablock := getScratch(ceilDiv(mb, mr) * panelA)
	defer putScratch(ablock)

	panelsN := ceilDiv(j.n, nr)
	tm, tn := grid(threads, ceilDiv(mb, mr), panelsN)
	threads = tm * tn

	for i0 := 0; i0 < j.m; i0 += mb {
		mcur := min(mb, j.m-i0)
		panelsM := ceilDiv(mcur, mr)
		for p0 := 0; p0 < j.k; p0 += kn.kc {
			kc := min(kn.kc, j.k-p0)
			beta := j.beta
			if p0 > 0 {
				beta = 1 // later depth blocks add to what the first wrote
			}
			sp, sr := aStrides(j.transA, mr, kcs)
			parallelFor(min(threads, panelsM), func(t int) {
				lo, hi := t*panelsM/min(threads, panelsM), (t+1)*panelsM/min(threads, panelsM)
				for q := lo; q < hi; q++ {
					rows := min(mr, mcur-q*mr)
					packA(j.transA, mr, j.a, j.lda, i0+q*mr, rows, p0, kc, kcs, ablock.data[q*panelA:(q+1)*panelA])
				}
			})
			parallelFor(threads, func(t int) {
				ti, tj := t/tn, t%tn
				e.sweep(j, ablock.data, i0, mcur, ti*panelsM/tm, (ti+1)*panelsM/tm,
					tj*panelsN/tn, (tj+1)*panelsN/tn, p0, kc, sp, sr, beta)
			})
		}
	}
}

// sweep multiplies A micro-panels [qa0, qa1) of the packed block (rows from
// i0) by op(B) columns in panels [qb0, qb1), packing B in NB-wide blocks.
func (e *Engine) sweep(j *job, apack []float32, i0, mcur, qa0, qa1, qb0, qb1, p0, kc int, sp, sr uintptr, beta float32) {
	if qa0 >= qa1 || qb0 >= qb1 {
		return
	}
	kn := e.kern
	mr, nr := kn.mr, kn.nr
	panelA := mr * kcStride(kn.kc)
	panelB := kc * nr
	nbPanels := max(1, kn.nb/nr)
	bblock := getScratch(min(nbPanels, qb1-qb0) * panelB)
	defer putScratch(bblock)
	var edge [16 * 64]float32 // scratch tile for partial tiles; ≥ mr·nr of every kernel
	ldc := uintptr(j.ldc) * 4

	for qb := qb0; qb < qb1; qb += nbPanels {
		nq := min(nbPanels, qb1-qb)
		for q := 0; q < nq; q++ {
			col := (qb + q) * nr
			packB(j.transB, nr, j.b, j.ldb, p0, kc, col, min(nr, j.n-col), bblock.data[q*panelB:(q+1)*panelB])
		}
		for qa := qa0; qa < qa1; qa++ {
			row := i0 + qa*mr
			rows := min(mr, j.m-row)
			ap := &apack[qa*panelA]
			for q := 0; q < nq; q++ {
				col := (qb + q) * nr
				cols := min(nr, j.n-col)
				bp := &bblock.data[q*panelB]
				if rows == mr && cols == nr {
					kn.micro(kc, ap, sp, sr, bp, &j.c[row*j.ldc+col], ldc, j.alpha, beta)
					continue
				}
				kn.micro(kc, ap, sp, sr, bp, &edge[0], uintptr(nr)*4, 1, 0)
				mergeEdge(edge[:mr*nr], nr, rows, cols, j.alpha, beta, j.c[row*j.ldc+col:], j.ldc)
			}
		}
	}
}

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
