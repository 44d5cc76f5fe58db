//go:build !amd64

package isa

// detect: the kernels have no assembly off amd64, so every tier there is
// the generic one.
func detect() Features { return Features{} }
