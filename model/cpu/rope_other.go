//go:build !amd64

package cpu

var ropeVector = false

func ropeRowAVX512(row *float32, heads, hs int, cos, sin *float64, sign float64) {
	panic("cpu: no RoPE vector kernel")
}
