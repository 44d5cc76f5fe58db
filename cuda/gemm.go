package cuda

import (
	"fmt"

	"github.com/r1go/r1go/model"
)

// Gemm computes c = alpha·op(a)·op(b) + beta·c for row-major float32
// matrices through cublasGemmEx, with float32 accumulation (and TF32
// tensor-core inputs when the Device was opened with TF32). beta = 0 never
// reads c, as cuBLAS documents.
func (d *Device) Gemm(transA, transB bool, m, n, k int, alpha float32, a model.Buffer, lda int, b model.Buffer, ldb int, beta float32, c model.Buffer, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	checkGemm(transA, transB, m, n, k, a.Len(), lda, b.Len(), ldb, c.Len(), ldc)
	pa, pb, pc := f32(a, -1, "Gemm a"), f32(b, -1, "Gemm b"), f32(c, -1, "Gemm c")
	defer d.enter()()
	d.gemm(transA, transB, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc)
}

func (d *Device) gemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) {
	g := rowMajorGemm(transA, transB, m, n, k, a, lda, b, ldb)
	d.fail(d.blas.gemm(d.handle, g, alpha, beta, c, ldc, d.computeType))
}

// checkGemm panics when a row-major operand is shorter than its shape and
// leading dimension need: cuBLAS would read or write past it.
func checkGemm(transA, transB bool, m, n, k, la, lda, lb, ldb, lc, ldc int) {
	need := func(rows, cols, ld int) int {
		if rows == 0 || cols == 0 {
			return 0
		}
		return (rows-1)*ld + cols
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	switch {
	case lda < max(ac, 1) || la < need(ar, ac, lda):
		panic(fmt.Sprintf("cuda: Gemm a of %d values, lda %d, cannot hold %dx%d", la, lda, ar, ac))
	case ldb < max(bc, 1) || lb < need(br, bc, ldb):
		panic(fmt.Sprintf("cuda: Gemm b of %d values, ldb %d, cannot hold %dx%d", lb, ldb, br, bc))
	case ldc < max(n, 1) || lc < need(m, n, ldc):
		panic(fmt.Sprintf("cuda: Gemm c of %d values, ldc %d, cannot hold %dx%d", lc, ldc, m, n))
	}
}
