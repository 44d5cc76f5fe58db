package cpu

import "github.com/r1go/r1go/internal/isa"

// addAVX512 (add_amd64.s) adds n float32 pairs, n a multiple of 64.
//
//go:noescape
func addAVX512(dst, a, b *float32, n int)

// addVector says whether this CPU runs addAVX512.
var addVector = isa.X86.AVX512F
