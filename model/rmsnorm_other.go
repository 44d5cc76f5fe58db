//go:build !amd64

package model

var rmsVector = false

func sumSquares8AVX512(x *float32, ld uintptr, n8 int, ss *[8]float64) {
	panic("model: no vector norm kernel")
}

func scaleRowAVX512(out, x, w *float32, n16 int, scale float64) {
	panic("model: no vector norm kernel")
}
