package model

import "golang.org/x/sys/cpu"

// dots4AVX and axpy32F64AVX512 are the cached attention's kernels
// (attn_amd64.s).
//
//go:noescape
func dots4AVX(q, k *float32, ldk uintptr, n, hs int, out *float32)

//go:noescape
func axpy32F64AVX512(acc *float64, v *float32, ldv uintptr, e *float64, n int)

// attnVector: the CPU runs both kernels.
var attnVector = cpu.X86.HasAVX512F
