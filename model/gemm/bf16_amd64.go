package gemm

import "github.com/r1go/r1go/internal/isa"

// dot4x1BF16AVX512 is the one-row kernel over bf16 rows (bf16_amd64.s).
//
//go:noescape
func dot4x1BF16AVX512(k int, a *float32, b *uint16, ldb uintptr, out *[4]float32)

func init() {
	if isa.X86.AVX512F && isa.X86.AVX512BW {
		dotBF16, dotBF16Step = dot4x1BF16AVX512, 16
	}
}
