//go:build !amd64

package cpu

// No vector kernel off amd64: exp32Into runs exp32 over the slice.
var (
	expVector func(dst, src *float32, n int, c *[12]float32) bool
	expLanes  = 1
)

func expKernels() map[string]expKernel { return nil }
