//go:build !amd64

package model

// No vector kernel off amd64: exp32Into runs exp32 over the slice.
var (
	expVector func(dst, src *float32, n int, c *[12]float32) bool
	expLanes  = 1
)

func expKernels() map[string]expKernel { return nil }

var exp64Vector = false

var sumExps8Vector = false

func exp64AVX512FMA(dst, src *float64, n int) bool { panic("model: no vector exp") }

func sumExps8AVX512(rows *[8]*float32, off, n int, invT, m, sums *[8]float64) bool {
	panic("model: no vector exp")
}
