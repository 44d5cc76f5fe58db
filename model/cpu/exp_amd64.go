package cpu

import "github.com/r1go/r1go/internal/isa"

// exp32AVX512 and exp32AVX2 (exp_amd64.s) set dst[i] = exp32(src[i]) for
// i < n, n a multiple of 16 (8), and report whether a lane was above expHi
// or NaN: those lanes hold garbage for the caller to redo with exp32.
//
//go:noescape
func exp32AVX512(dst, src *float32, n int, c *[12]float32) (special bool)

//go:noescape
func exp32AVX2(dst, src *float32, n int, c *[12]float32) (special bool)

// expVector is the fastest vector kernel of this CPU (nil: none) and
// expLanes its width.
var expVector, expLanes = func() (func(dst, src *float32, n int, c *[12]float32) bool, int) {
	switch {
	case isa.X86.AVX512F:
		return exp32AVX512, 16
	case isa.X86.AVX2:
		return exp32AVX2, 8
	}
	return nil, 1
}()

// expKernels lists every vector kernel this CPU runs, for the tests.
func expKernels() map[string]expKernel {
	ks := map[string]expKernel{}
	if isa.X86.AVX512F {
		ks["avx512"] = expKernel{exp32AVX512, 16}
	}
	if isa.X86.AVX2 {
		ks["avx2"] = expKernel{exp32AVX2, 8}
	}
	return ks
}
