package cpu

import (
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/cpu/gemm"
)

// Gemm on the CPU: float32 goes to the tuned, parallel kernels of package
// gemm; float64 (tests only) to a straightforward loop in float64.
func (d *Device[F]) Gemm(transA, transB bool, m, n, k int, alpha float32, a model.Buffer, lda int, b model.Buffer, ldb int, beta float32, c model.Buffer, ldc int) {
	defer d.timed(opGemm)()
	if m == 0 || n == 0 {
		return
	}
	if t, ok := b.(bf16TileBuf); ok {
		d.gemmTiles(transA, transB, m, n, k, alpha, a, lda, t, ldb, beta, c, ldc)
		return
	}
	if h, ok := b.(bf16DotBuf); ok && transB && !transA {
		if a32, ok := any(buf[F](a)).([]float32); ok &&
			gemm.SgemmDotBF16TransB(m, n, k, alpha, a32, lda, h, ldb, beta, any(buf[F](c)).([]float32), ldc, d.threads) {
			return
		}
	}
	if h, ok := asBF16(b); ok {
		d.gemmBF16(transA, transB, m, n, k, alpha, buf[F](a), lda, h, ldb, beta, buf[F](c), ldc)
		return
	}
	A, B, C := buf[F](a), buf[F](b), buf[F](c)
	if a32, ok := any(A).([]float32); ok {
		gemm.Sgemm(transA, transB, m, n, k, alpha, a32, lda, any(B).([]float32), ldb, beta, any(C).([]float32), ldc)
		return
	}
	d.parallel(m, 1, func(lo, hi int) {
		naiveGemm(transA, transB, lo, hi, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
	})
}

// serial is a one-thread matmul engine for work that is already split
// among the cores (attention blocks).
var serial = func() *gemm.Engine {
	e, err := gemm.NewEngine("", 1)
	if err != nil {
		panic(err)
	}
	return e
}()

// gemm1 is Gemm on the calling goroutine only.
func gemm1[F Float](transA, transB bool, m, n, k int, alpha float32, A []F, lda int, B []F, ldb int, beta float32, C []F, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if a32, ok := any(A).([]float32); ok {
		serial.Sgemm(transA, transB, m, n, k, alpha, a32, lda, any(B).([]float32), ldb, beta, any(C).([]float32), ldc)
		return
	}
	naiveGemm(transA, transB, 0, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
}

// naiveGemm computes rows [lo, hi) of C with float64 accumulation.
func naiveGemm[F Float](transA, transB bool, lo, hi, n, k int, alpha float32, A []F, lda int, B []F, ldb int, beta float32, C []F, ldc int) {
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
}
