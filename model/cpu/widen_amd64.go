package cpu

import "github.com/r1go/r1go/internal/isa"

// widenBF16AVX512 and widenBF16AVX2 (widen_amd64.s) widen n bf16 values,
// n a multiple of 16 (8).
//
//go:noescape
func widenBF16AVX512(dst *float32, src *uint16, n int)

//go:noescape
func widenBF16AVX2(dst *float32, src *uint16, n int)

// widenVector is the widest widening kernel of the tier in force (nil:
// none) and widenLanes the multiple of n it takes.
var widenVector, widenLanes = func() (func(dst *float32, src *uint16, n int), int) {
	switch {
	case isa.X86.AVX512F:
		return widenBF16AVX512, 16
	case isa.X86.AVX2:
		return widenBF16AVX2, 8
	}
	return nil, 1
}()

// widenKernels lists every widening kernel this CPU runs, for the tests.
func widenKernels() map[string]func(dst *float32, src *uint16, n int) {
	ks := map[string]func(dst *float32, src *uint16, n int){}
	if isa.X86.AVX512F {
		ks["avx512"] = widenBF16AVX512
	}
	if isa.X86.AVX2 {
		ks["avx2"] = widenBF16AVX2
	}
	return ks
}
