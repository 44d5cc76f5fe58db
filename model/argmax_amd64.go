package model

import "github.com/r1go/r1go/internal/isa"

// maxAVX512 and firstEqualAVX512 (argmax_amd64.s) scan 16·n16 floats: the
// largest and whether any is NaN; the first index equal to v, or −1.
//
//go:noescape
func maxAVX512(x *float32, n16 int) (m float32, nan bool)

//go:noescape
func firstEqualAVX512(x *float32, n16 int, v float32) int

var argmaxVector = isa.X86.AVX512F
