package gemm

import (
	"fmt"
	"math"
	"runtime"
)

// The bf16 few-rows path: C = alpha·op(A)·Bᵀ + beta·C with B stored as
// bfloat16 bit patterns (frozen weights) and A, C float32, for at most
// BF16Rows rows of op(A) (batch-1 decode). Each element is a dot product
// of a float32 row of A and a widened row of B; the kernel reads B's two
// bytes per weight once, the memory-bandwidth bound of a decode step being
// the bytes of the weights.

// BF16Rows is the most rows of A the bf16 dot path takes: each row of A
// reads all of B again, so beyond a few rows widening B once into a
// float32 panel and using the packed kernels is faster.
const BF16Rows = 2

// dotBF16 computes out[r] = Σ_{p<k} a[p]·widen(b_r[p]) for four rows b_r
// of B, ldb bytes apart; k is a multiple of dotBF16Step. It is the twin of
// the default kernel's one-row kernel (kernel.dot1BF16): the same sums in
// the same order, so a one-row product gives the bits of the float32
// product of the widened weights.
var dotBF16, dotBF16Step = bf16Dot()

func bf16Dot() (dotKernel1BF16, int) {
	if k := kernels[0]; k.dot1BF16 != nil {
		return k.dot1BF16, k.dotStep
	}
	return dot4x1BF16Go, goDotStep
}

// HasBF16Kernel says whether an assembly kernel serves the bf16 dot path.
func HasBF16Kernel() bool { return kernels[0] != genericKernel && kernels[0].dot1BF16 != nil }

// SgemmBF16TransB computes C = alpha·A·Bᵀ + beta·C for A [m, k] (row pitch
// lda), B [n, k] bf16 (row pitch ldb) and C [m, n] (row pitch ldc), on up
// to threads goroutines (0: GOMAXPROCS). beta = 0 never reads C.
func SgemmBF16TransB(m, n, k int, alpha float32, a []float32, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int, threads int) {
	if m < 0 || n < 0 || k < 0 || lda < k || ldb < k || ldc < n {
		panic(fmt.Sprintf("gemm: bf16 product m=%d n=%d k=%d with lda=%d ldb=%d ldc=%d", m, n, k, lda, ldb, ldc))
	}
	if m == 0 || n == 0 {
		return
	}
	if len(a) < (m-1)*lda+k || len(b) < (n-1)*ldb+k || len(c) < (m-1)*ldc+n {
		panic("gemm: bf16 product operands shorter than their shapes")
	}
	kv := k / dotBF16Step * dotBF16Step
	groups := ceilDiv(n, 4)
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	per := max(16, ceilDiv(groups, 8*threads))
	forEach(threads, ceilDiv(groups, per), func(t int) {
		var out [4]float32
		for g := t * per; g < min(groups, (t+1)*per); g++ {
			j0 := g * 4
			nw := min(4, n-j0)
			for i := 0; i < m; i++ {
				ar := a[i*lda : i*lda+k]
				for r0 := 0; r0 < nw; {
					width, ld := 4, uintptr(ldb)*2
					if nw-r0 < 4 {
						width, ld = 1, 0
					}
					out = [4]float32{}
					if kv > 0 {
						dotBF16(kv, &ar[0], &b[(j0+r0)*ldb], ld, &out)
					}
					for r := 0; r < width; r++ {
						j := j0 + r0 + r
						br := b[j*ldb : j*ldb+k]
						s := out[r]
						for p := kv; p < k; p++ {
							s += ar[p] * math.Float32frombits(uint32(br[p])<<16)
						}
						// small.go's expressions, so that a compiler that
						// fuses fuses both alike.
						if beta == 0 {
							c[i*ldc+j] = alpha * s
						} else {
							c[i*ldc+j] = alpha*s + beta*c[i*ldc+j]
						}
					}
					r0 += width
				}
			}
		}
	})
}
