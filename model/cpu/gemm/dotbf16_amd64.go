package gemm

import "github.com/r1go/r1go/internal/isa"

// The AVX512_BF16 kernels (dotbf16_amd64.s, written by gen_dotbf16.py).

//go:noescape
func dotTileBF16(k32, mt int, a *uint16, lda uintptr, b *uint16, ldb uintptr, c *float32, ldc uintptr, pf *uint16)

//go:noescape
func cvtBF16(n32 int, src *float32, dst *uint16)

// blockTr8 transposes blocks of sums into C and packs A's pairs (every
// AVX512_BF16 CPU has AVX; the Go loop serves the tests of the AMX model
// on the generic tier).
var blockTr8 = func() func(src *float32, lds uintptr, dst *float32, ldd uintptr, blocks int) {
	if isa.X86.AVX {
		return transpose8AVX
	}
	return transpose8Go
}()

var hasDotBF16 = isa.X86.AVX512F && isa.X86.AVX512BF16

//go:noescape
func dotPanelsBF16x32(k32, panels int, b *uint16, ldb uintptr, a *uint16, ct *float32)

//go:noescape
func dotPanelsBF16x16(k32, panels int, b *uint16, ldb uintptr, a *uint16, ct *float32)
