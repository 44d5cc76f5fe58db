//go:build !amd64

package cpu

var swigluVector = false

func swigluTailAVX512(out, gate, up, ex *float32, n int) { panic("cpu: no SwiGLU vector kernel") }

func swiglu32AVX512(out, gate, up *float32, n int, c *[12]float32) bool {
	panic("cpu: no SwiGLU vector kernel")
}

func negateAVX512(dst, src *float32, n int) { panic("cpu: no SwiGLU vector kernel") }
