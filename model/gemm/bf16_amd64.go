package gemm

import "golang.org/x/sys/cpu"

// dot4x1BF16AVX512 is the one-row kernel over bf16 rows (bf16_amd64.s).
//
//go:noescape
func dot4x1BF16AVX512(k int, a *float32, b *uint16, ldb uintptr, out *[4]float32)

func init() {
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW {
		dotBF16, dotBF16Step = dot4x1BF16AVX512, 16
	}
}
