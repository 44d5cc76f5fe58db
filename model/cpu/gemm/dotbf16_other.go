//go:build !amd64

package gemm

// No bf16 dot product kernels off amd64: SgemmDotBF16TransB declines.
const hasDotBF16 = false

func dotTileBF16(k32, mt int, a *uint16, lda uintptr, b *uint16, ldb uintptr, c *float32, ldc uintptr, pf *uint16) {
	panic("gemm: no bf16 dot kernel")
}

func dotPanelsBF16x32(k32, panels int, b *uint16, ldb uintptr, a *uint16, ct *float32) {
	panic("gemm: no bf16 dot kernel")
}

func dotPanelsBF16x16(k32, panels int, b *uint16, ldb uintptr, a *uint16, ct *float32) {
	panic("gemm: no bf16 dot kernel")
}

// blockTr8 is the Go transpose off amd64 (the AMX model's tests pack with it).
var blockTr8 = transpose8Go

func cvtBF16(n32 int, src *float32, dst *uint16) { panic("gemm: no bf16 conversion kernel") }
