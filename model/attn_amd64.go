package model

import "golang.org/x/sys/cpu"

// attnVector: the CPU runs both kernels.
var attnVector = cpu.X86.HasAVX512F

// dotsGroupAVX512 and axpyGroupF64AVX512 are the grouped kernels: up to
// eight query heads sharing a KV head at once (attn_amd64.s).
//
//go:noescape
func dotsGroupAVX512(qp, k *float32, ldk uintptr, n, chunks int, out *float32)

//go:noescape
func axpyGroupF64AVX512(acc *float64, v *float32, ldv uintptr, e *float64, n, hs int)
