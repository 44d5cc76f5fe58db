//go:build !amd64

package model

var widenVector = false

func widenBF16AVX512(dst *float32, src *uint16, n int) { panic("model: no bf16 widening kernel") }
