//go:build !amd64

package cpu

var rmsVector = false

func sumSquares8AVX512(x *float32, ld uintptr, n8 int, ss *[8]float64) {
	panic("cpu: no vector norm kernel")
}

func scaleRowAVX512(out, x, w *float32, n16 int, scale float64) {
	panic("cpu: no vector norm kernel")
}
