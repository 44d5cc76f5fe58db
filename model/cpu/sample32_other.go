//go:build !amd64

package cpu

var sample32Vector = false

func sumExp32BlocksAVX512(row *float32, n, blk int, invT, m float32, c *[12]float32, sums *float64) {
	panic("cpu: no float32 sampling kernel")
}
