package model

import "github.com/r1go/r1go/internal/isa"

// attnVector: the CPU runs both kernels.
var attnVector = isa.X86.AVX512F && isa.X86.AVX512VL

// dotsGroupAVX512 and axpyGroupF64AVX512 are the grouped kernels: up to
// eight query heads sharing a KV head at once (attn_amd64.s).
//
//go:noescape
func dotsGroupAVX512(qp, k *float32, ldk uintptr, n, chunks int, out, pv *float32)

//go:noescape
func axpyGroupF64AVX512(acc *float64, v *float32, ldv uintptr, e *float64, n, hs, nh int)

// scoresGroupAVX512, argsGroupAVX512 and weightsGroupAVX512 are
// attendGroup32's softmax loops, eight heads a vector (attn_amd64.s).
//
//go:noescape
func scoresGroupAVX512(sc *float32, p *float64, n int, scale float64, m *[8]float64) (nan bool)

//go:noescape
func argsGroupAVX512(p *float64, arg *float32, n int, m *[8]float64)

//go:noescape
func weightsGroupAVX512(ex *float32, p *float64, n int, sum *[8]float64)

// dotsGroupBF16AVX512 and axpyOutBF16AVX512 are attendGroupBF16's
// kernels against a bf16 KV cache (attn_bf16_amd64.s).
//
//go:noescape
func dotsGroupBF16AVX512(qp *float32, k *uint16, ldk uintptr, n, chunks int, out *float32, pv *uint16)

//go:noescape
func axpyOutBF16AVX512(out *float32, v *uint16, ldv uintptr, e *float32, n, hs, nh int, r *[8]float64)

// packQBF16AVX512 lays out a group's queries for dotsGroupBF16AVX512.
//
//go:noescape
func packQBF16AVX512(qp, q *float32, nh, hs int)

// softmaxGroup32AVX512 is softmaxGroup32Loops in vector lanes, or false
// when a score is not finite (attn_bf16_amd64.s).
//
//go:noescape
func softmaxGroup32AVX512(sc, ex *float32, n int, scale float32, c *[12]float32, sum *[8]float64) (ok bool)
