//go:build !amd64

package model

var attnVector = false

func dotsGroupAVX512(qp, k *float32, ldk uintptr, n, chunks int, out *float32) {
	panic("model: no vector attention kernel")
}

func axpyGroupF64AVX512(acc *float64, v *float32, ldv uintptr, e *float64, n, hs int) {
	panic("model: no vector attention kernel")
}
