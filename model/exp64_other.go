//go:build !amd64

package model

// No vector kernel off amd64: exp64Into and sumExps run math.Exp.
var exp64Vector = false

var sumExps8Vector = false

func exp64AVX512FMA(dst, src *float64, n int) bool { panic("model: no vector exp") }

func sumExps8AVX512(rows *[8]*float32, off, n int, invT, m, sums *[8]float64) bool {
	panic("model: no vector exp")
}
