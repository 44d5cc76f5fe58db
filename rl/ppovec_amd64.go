package rl

import "golang.org/x/sys/cpu"

// useAVX2 selects the AVX2/FMA loop for the plain PPO loss (no fused
// entropy or KL term); tests turn it off to check it against the scalar loop.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// ppoVecAVX2 is implemented in ppovec_amd64.s.
//
//go:noescape
func ppoVecAVX2(mask *bool, lp, old, adv, grad *float64, n int, k *ppoVecConsts, acc *[6][4]float64)

// ppoFullVecAVX2 is implemented in ppovec_amd64.s.
//
//go:noescape
func ppoFullVecAVX2(mask *bool, lp, old, adv, ent, ref, grad, gradEnt *float64, n int, k *ppoFullConsts, acc *[6][4]float64)

// valueVecAVX2 is implemented in ppovec_amd64.s.
//
//go:noescape
func valueVecAVX2(mask *bool, v, vold, ret, grad *float64, n int, k *valueVecConsts, acc *[4][4]float64)

// gspoSumAVX2 and gspoLossAVX2 are implemented in ppovec_amd64.s.
//
//go:noescape
func gspoSumAVX2(mask *bool, lp, old, adv *float64, n int, acc *[3][4]float64)

//go:noescape
func gspoLossAVX2(mask *bool, adv, grad *float64, n int, k *gspoVecConsts, acc *[2][4]float64)

// useAVX512 selects the eight-lane loop for the plain PPO loss.
var useAVX512 = useAVX2 && cpu.X86.HasAVX512F

// ppoVecAVX512 is implemented in ppovec_amd64.s.
//
//go:noescape
func ppoVecAVX512(mask *bool, lp, old, adv, grad *float64, n int, k *ppoVecConsts, acc *[6][8]float64)

// ppoFullVecAVX512 is implemented in ppovec_amd64.s.
//
//go:noescape
func ppoFullVecAVX512(mask *bool, lp, old, adv, ent, ref, grad, gradEnt *float64, n int, k *ppoFullConsts, acc *[6][8]float64)

// gspoSumAVX512 and gspoLossAVX512 are implemented in ppovec_amd64.s.
//
//go:noescape
func gspoSumAVX512(mask *bool, lp, old, adv *float64, n int, acc *[3][8]float64)

//go:noescape
func gspoLossAVX512(mask *bool, adv, grad *float64, n int, k *gspoVecConsts, acc *[2][8]float64)
