package cpu

import "github.com/r1go/r1go/internal/isa"

// ropeRowAVX512 (rope_amd64.s) is rope's loop over one row's heads, eight
// pairs at a time, hs/2 a multiple of 8.
//
//go:noescape
func ropeRowAVX512(row *float32, heads, hs int, cos, sin *float64, sign float64)

// ropeVector says whether this CPU runs ropeRowAVX512.
var ropeVector = isa.X86.AVX512F
