//go:build !amd64

package model

const argmaxVector = false

func maxAVX512(x *float32, n16 int) (float32, bool)       { panic("model: no vector argmax") }
func firstEqualAVX512(x *float32, n16 int, v float32) int { panic("model: no vector argmax") }
