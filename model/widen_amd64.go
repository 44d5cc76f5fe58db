package model

import "github.com/r1go/r1go/internal/isa"

// widenBF16AVX512 (widen_amd64.s) widens n bf16 values, n a multiple of 16.
//
//go:noescape
func widenBF16AVX512(dst *float32, src *uint16, n int)

// widenVector says whether this CPU runs widenBF16AVX512.
var widenVector = isa.X86.AVX512F
