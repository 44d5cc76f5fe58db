package cuda

import (
	"fmt"

	"github.com/r1go/r1go/model"
)

// Gemm computes c = alpha·op(a)·op(b) + beta·c for row-major matrices
// through cublasGemmEx, always accumulating in float32. With a, b and c
// all float32 it is a float32 product (TF32 tensor-core inputs when the
// Device was opened with TF32; bf16 inputs in mixed precision, mixed.go).
// Otherwise the inputs are bf16 (tensor cores) and c is float32 or bf16:
// a float32 a or b is rounded to bf16 on its way in (a registered
// weight is read from its bf16 copy). That serves a frozen bf16 model's
// weights against float32 activations (frozen.go) and mixed precision's
// bf16 activations (a layer's norm, attention and MLP outputs,
// activations.go of package model): bf16 activations times the weights'
// bf16 copy into a bf16 projection (qkv, gate|up) or a float32 branch
// output, and the float32 gradients times bf16 activations into float32
// weight gradients. A bf16 c is rounded once from the float32 sum (with
// beta ≠ 0 the old c is read widened). beta = 0 never reads c, as cuBLAS
// documents.
func (d *Device) Gemm(transA, transB bool, m, n, k int, alpha float32, a model.Buffer, lda int, b model.Buffer, ldb int, beta float32, c model.Buffer, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	checkGemm(transA, transB, m, n, k, a.Len(), lda, b.Len(), ldb, c.Len(), ldc)
	A, B, C := gemmOperand(a, "a"), gemmOperand(b, "b"), gemmOperand(c, "c")
	defer d.enter()()
	if d.rb.on {
		return
	}
	if A.dtype == F32 && B.dtype == F32 && C.dtype == F32 {
		d.gemm(transA, transB, m, n, k, alpha, A.ptr, lda, B.ptr, ldb, beta, C.ptr, ldc)
		return
	}
	qa, qb := A.ptr, B.ptr
	if A.dtype == F32 {
		ar, ac := m, k
		if transA {
			ar, ac = k, m
		}
		qa = d.bf16Operand(A.ptr, span(ar, ac, lda), "mixed-a")
	}
	if B.dtype == F32 {
		br, bc := k, n
		if transB {
			br, bc = n, k
		}
		qb = d.bf16Operand(B.ptr, span(br, bc, ldb), "mixed-b")
	}
	d.gemmBF16(transA, transB, m, n, k, alpha, qa, lda, qb, ldb, beta, C.ptr, C.dtype, ldc)
}

func gemmOperand(b model.Buffer, what string) Buffer {
	x, ok := b.(Buffer)
	if !ok {
		panic(fmt.Sprintf("cuda: Gemm %s is a %T, not a CUDA buffer", what, b))
	}
	if x.dtype != F32 && x.dtype != BF16 {
		panic(fmt.Sprintf("cuda: Gemm %s holds %s", what, x.dtype))
	}
	return x
}

// cudaType is the cudaDataType of an element type.
func cudaType(t DType) int {
	if t == BF16 {
		return cudaR16BF
	}
	return cudaR32F
}

func (d *Device) gemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) {
	if d.rb.on {
		return
	}
	if d.mixed {
		d.gemmMixed(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
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
