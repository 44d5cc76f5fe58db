//go:build !amd64

package rl

var useAVX2 = false

func ppoVecAVX2(mask *bool, lp, old, adv, grad *float64, n int, k *ppoVecConsts, acc *[6][4]float64) {
	panic("rl: ppoVecAVX2 without AVX2")
}

func ppoFullVecAVX2(mask *bool, lp, old, adv, ent, ref, grad, gradEnt *float64, n int, k *ppoFullConsts, acc *[6][4]float64) {
	panic("rl: ppoFullVecAVX2 without AVX2")
}

func valueVecAVX2(mask *bool, v, vold, ret, grad *float64, n int, k *valueVecConsts, acc *[4][4]float64) {
	panic("rl: valueVecAVX2 without AVX2")
}

func gspoSumAVX2(mask *bool, lp, old, adv *float64, n int, acc *[3][4]float64) {
	panic("rl: gspoSumAVX2 without AVX2")
}

func gspoLossAVX2(mask *bool, adv, grad *float64, n int, k *gspoVecConsts, acc *[2][4]float64) {
	panic("rl: gspoLossAVX2 without AVX2")
}

var useAVX512 = false

func ppoVecAVX512(mask *bool, lp, old, adv, grad *float64, n int, k *ppoVecConsts, acc *[6][8]float64) {
	panic("rl: ppoVecAVX512 without AVX-512")
}

func ppoFullVecAVX512(mask *bool, lp, old, adv, ent, ref, grad, gradEnt *float64, n int, k *ppoFullConsts, acc *[6][8]float64) {
	panic("rl: ppoFullVecAVX512 without AVX-512")
}

func gspoSumAVX512(mask *bool, lp, old, adv *float64, n int, acc *[3][8]float64) {
	panic("rl: gspoSumAVX512 without AVX-512")
}

func gspoLossAVX512(mask *bool, adv, grad *float64, n int, k *gspoVecConsts, acc *[2][8]float64) {
	panic("rl: gspoLossAVX512 without AVX-512")
}
