package cpu

import "github.com/r1go/r1go/internal/isa"

// sumExp32BlocksAVX512 (sample32_amd64.s) is blockSums32's loop sixteen
// lanes at a time, n and blk multiples of 16.
//
//go:noescape
func sumExp32BlocksAVX512(row *float32, n, blk int, invT, m float32, c *[12]float32, sums *float64)

// sample32Vector says whether this CPU runs sumExp32BlocksAVX512.
var sample32Vector = isa.X86.AVX512F && isa.X86.AVX512DQ
