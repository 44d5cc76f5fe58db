//go:build !amd64

package cpu

// No widening kernel off amd64: widenInto runs its loop.
var (
	widenVector func(dst *float32, src *uint16, n int)
	widenLanes  = 1
)

func widenKernels() map[string]func(dst *float32, src *uint16, n int) { return nil }
