package model

import "github.com/r1go/r1go/model/gemm"

// sgemm is the float32 entry point of the CPU device's matmul: the tuned,
// parallel kernels of package gemm.
func sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	gemm.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
