//go:build !amd64

package cpu

var addVector = false

func addAVX512(dst, a, b *float32, n int) { panic("cpu: no vector add kernel") }
