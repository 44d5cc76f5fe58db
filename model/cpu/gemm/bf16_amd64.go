package gemm

// dot4x1BF16AVX512 and dot4x1BF16AVX2 are the one-row kernels over bf16
// rows (bf16_amd64.s), each with the arithmetic of the float32 one-row
// kernel of its tier (dot4x1AVX512, dot4x1AVX2): the kernels' dot1BF16.
//
//go:noescape
func dot4x1BF16AVX512(k int, a *float32, b *uint16, ldb uintptr, out *[4]float32)

//go:noescape
func dot4x1BF16AVX2(k int, a *float32, b *uint16, ldb uintptr, out *[4]float32)
