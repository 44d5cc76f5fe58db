package cpu

import "github.com/r1go/r1go/internal/isa"

// rmsVector says whether this CPU runs RMSNorm's vector kernels.
var rmsVector = isa.X86.AVX512F

// sumSquares8AVX512 and scaleRowAVX512 are RMSNorm's loops for eight rows
// and for a row's output (rmsnorm_amd64.s).
//
//go:noescape
func sumSquares8AVX512(x *float32, ld uintptr, n8 int, ss *[8]float64)

//go:noescape
func scaleRowAVX512(out, x, w *float32, n16 int, scale float64)
