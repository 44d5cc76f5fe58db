package model

// Gemm on the CPU: float32 goes to the tuned kernels of package gemm;
// float64 (tests only) to a straightforward loop accumulated in float64.
func (d *CPU[F]) Gemm(transA, transB bool, m, n, k int, alpha float32, a Buffer, lda int, b Buffer, ldb int, beta float32, c Buffer, ldc int) {
	A, B, C := buf[F](a), buf[F](b), buf[F](c)
	if m == 0 || n == 0 {
		return
	}
	if a32, ok := any(A).([]float32); ok {
		sgemm(transA, transB, m, n, k, alpha, a32, lda, any(B).([]float32), ldb, beta, any(C).([]float32), ldc)
		return
	}
	d.parallel(m, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			for j := 0; j < n; j++ {
				var s float64
				for p := 0; p < k; p++ {
					var x, y F
					if transA {
						x = A[p*lda+i]
					} else {
						x = A[i*lda+p]
					}
					if transB {
						y = B[j*ldb+p]
					} else {
						y = B[p*ldb+j]
					}
					s += float64(x) * float64(y)
				}
				s *= float64(alpha)
				if beta != 0 {
					s += float64(beta) * float64(C[i*ldc+j])
				}
				C[i*ldc+j] = F(s)
			}
		}
	})
}
