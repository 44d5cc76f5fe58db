package model

import "github.com/r1go/r1go/internal/isa"

// exp64AVX512FMA (exp64_amd64.s) sets dst[i] = math.Exp(src[i]) for i < n,
// n a multiple of 8, taking math.Exp's FMA path; it reports whether a lane
// took another branch of math.Exp (then its value is garbage).
//
//go:noescape
func exp64AVX512FMA(dst, src *float64, n int) (special bool)

// exp64Vector: the CPU runs exp64AVX512FMA, and math.Exp takes its FMA
// path here too (it does where the CPU has AVX and FMA).
var exp64Vector = isa.X86.AVX512F && isa.X86.AVX && isa.X86.FMA

// sumExps8AVX512 (exp64_amd64.s) is sumExps's loop for eight rows at once,
// columns [off, off+n) of each (n a multiple of 8), a lane a row: sums[i]
// += exp(float64(rows[i][j])·invT[i] − m[i]) for j in order, with
// math.Exp's bits. It reports whether some x lay outside (−708, 709) or
// was NaN (then the sums are garbage).
//
//go:noescape
func sumExps8AVX512(rows *[8]*float32, off, n int, invT, m, sums *[8]float64) (special bool)

// sumExps8Vector: the CPU runs sumExps8AVX512, whose 256-bit integer
// operations on registers 16-31 need AVX512VL beside exp64Vector's set.
var sumExps8Vector = exp64Vector && isa.X86.AVX512VL
