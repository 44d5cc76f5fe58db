//go:build !amd64

package gemm

// No bf16 dot product kernels off amd64: SgemmDotBF16TransB declines.
const hasDotBF16 = false

func dotTileBF16(k32, mt int, a *uint16, lda uintptr, b *uint16, ldb uintptr, c *float32, ldc uintptr, pf *uint16) {
	panic("gemm: no bf16 dot kernel")
}

func cvtBF16(n32 int, src *float32, dst *uint16) { panic("gemm: no bf16 conversion kernel") }
