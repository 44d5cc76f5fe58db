//go:build !amd64

package model

var attnVector = false

func dots4AVX(q, k *float32, ldk uintptr, n, hs int, out *float32) {
	panic("model: no vector attention kernel")
}

func axpy32F64AVX512(acc *float64, v *float32, ldv uintptr, e *float64, n int) {
	panic("model: no vector attention kernel")
}
