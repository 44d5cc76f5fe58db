#include "textflag.h"

// EXP3 sets C = e^R for |R| ≤ ln2/2, the degree-13 Taylor polynomial with
// c_i = 1/i! at 576 − 32i(DX), split into three short Horner chains so that
// consecutive iterations overlap: C = A + r⁵(B + r⁵C) with A = c0..c4,
// B = c5..c9, C = c10..c13. A, B and T are clobbered.
#define EXP3(R, A, B, C, T) \
	VMOVUPD     448(DX), A \
	VFMADD213PD 480(DX), R, A \
	VFMADD213PD 512(DX), R, A \
	VFMADD213PD 544(DX), R, A \
	VFMADD213PD 576(DX), R, A \
	VMOVUPD     288(DX), B \
	VFMADD213PD 320(DX), R, B \
	VFMADD213PD 352(DX), R, B \
	VFMADD213PD 384(DX), R, B \
	VFMADD213PD 416(DX), R, B \
	VMOVUPD     160(DX), C \
	VFMADD213PD 192(DX), R, C \
	VFMADD213PD 224(DX), R, C \
	VFMADD213PD 256(DX), R, C \
	VMULPD      R, R, T \
	VMULPD      T, T, T \
	VMULPD      R, T, T \
	VFMADD213PD B, T, C \
	VFMADD213PD A, T, C

// func ppoVecAVX2(mask *bool, lp, old, adv, grad *float64, n int, k *ppoVecConsts, acc *[6][4]float64)
//
// The vanilla PPO token loop of ppoFused, four tokens per step (n is a
// multiple of 4). Per token, with on = mask:
//   d = lp − old, dc = clamp(d, ±20), ρ = e^dc (range reduction by ln 2 and
//   a degree-13 polynomial, EXP3), ℓ1 = −Aρ, ℓ2 = −A·clamp(ρ, lo, hi),
//   clip = ℓ2 > ℓ1, ℓc = clip ? ℓ2 : ℓ1, grad = clip ? 0 : ℓ1,
//   lower = A < 0 ∧ ℓc > −A·c, ℓ = lower ? −A·c : ℓc, grad = lower ? 0 : grad,
//   grad = 0 unless d = dc and on; g = w·grad (0 on masked-out tokens).
// Accumulated per lane: Σ on·ℓ, Σ on·dc, Σ on·(x − x) (finiteness),
// Σ on, Σ on·clip, Σ on·lower, stored to acc in that order.
//
// Constant layout (ppoVecConsts, each entry four equal float64s):
//   0 −20, 32 +20, 64 log2 e, 96 ln2 hi, 128 ln2 lo, 160..576 poly c13..c0,
//   608 lo, 640 hi, 672 c, 704 w, 736 1.0
TEXT ·ppoVecAVX2(SB), NOSPLIT, $0-64
	MOVQ mask+0(FP), SI
	MOVQ lp+8(FP), DI
	MOVQ old+16(FP), R8
	MOVQ adv+24(FP), R9
	MOVQ grad+32(FP), R10
	MOVQ n+40(FP), BX
	MOVQ k+48(FP), DX
	MOVQ acc+56(FP), R11
	XORQ CX, CX
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
	VXORPD Y12, Y12, Y12
	VXORPD Y13, Y13, Y13
	VXORPD Y14, Y14, Y14
	VXORPD Y15, Y15, Y15

loop:
	CMPQ CX, BX
	JGE  done

	// on: 0/1 bytes widened to 64-bit lanes, then 0 − x = all ones where on
	VPMOVZXBQ (SI)(CX*1), Y0
	VPXOR     Y1, Y1, Y1
	VPSUBQ    Y0, Y1, Y0

	VMOVUPD (DI)(CX*8), Y1
	VSUBPD  (R8)(CX*8), Y1, Y1 // d
	VMOVUPD (R9)(CX*8), Y2     // A

	// finiteness: (d + A) − (d + A) is NaN for a NaN or ±Inf input
	VADDPD Y2, Y1, Y3
	VSUBPD Y3, Y3, Y3
	VANDPD Y0, Y3, Y3
	VADDPD Y3, Y12, Y12

	VMAXPD 0(DX), Y1, Y3
	VMINPD 32(DX), Y3, Y3    // dc
	VCMPPD $0x00, Y3, Y1, Y4 // in range: d == dc
	VANDPD Y0, Y3, Y5
	VADDPD Y5, Y11, Y11

	// ρ = e^dc = 2^kf · e^r, kf = round(dc·log2 e), r = dc − kf·ln 2
	VMULPD       64(DX), Y3, Y5
	VROUNDPD     $0, Y5, Y5
	VFNMADD231PD 96(DX), Y5, Y3
	VFNMADD231PD 128(DX), Y5, Y3 // r

	EXP3(Y3, Y7, Y8, Y6, Y9) // ρ mantissa part
	VCVTPD2DQY   Y5, X7
	VPMOVSXDQ    X7, Y7
	VPSLLQ       $52, Y7, Y7
	VPADDQ       Y7, Y6, Y6 // ρ

	VXORPD    Y8, Y8, Y8
	VSUBPD    Y2, Y8, Y8      // −A
	VMULPD    Y6, Y8, Y9      // ℓ1
	VMAXPD    608(DX), Y6, Y7
	VMINPD    640(DX), Y7, Y7
	VMULPD    Y7, Y8, Y7      // ℓ2
	VCMPPD    $0x0e, Y9, Y7, Y5 // clip: ℓ2 > ℓ1
	VBLENDVPD Y5, Y7, Y9, Y3  // ℓc
	VANDNPD   Y9, Y5, Y9      // grad
	VANDPD    Y0, Y5, Y5
	VANDPD    736(DX), Y5, Y5
	VADDPD    Y5, Y14, Y14

	VMULPD    672(DX), Y8, Y7   // ℓ3 = −A·c
	VCMPPD    $0x0e, Y7, Y3, Y5 // ℓc > ℓ3
	VXORPD    Y6, Y6, Y6
	VCMPPD    $0x01, Y6, Y2, Y6 // A < 0
	VANDPD    Y6, Y5, Y5        // lower
	VBLENDVPD Y5, Y7, Y3, Y3    // ℓ
	VANDNPD   Y9, Y5, Y9
	VANDPD    Y4, Y9, Y9
	VANDPD    Y0, Y9, Y9
	VMULPD    704(DX), Y9, Y9
	VMOVUPD   Y9, (R10)(CX*8)

	VANDPD Y0, Y5, Y5
	VANDPD 736(DX), Y5, Y5
	VADDPD Y5, Y15, Y15
	VANDPD Y0, Y3, Y3
	VADDPD Y3, Y10, Y10
	VANDPD 736(DX), Y0, Y5
	VADDPD Y5, Y13, Y13

	ADDQ $4, CX
	JMP  loop

done:
	VMOVUPD Y10, 0(R11)
	VMOVUPD Y11, 32(R11)
	VMOVUPD Y12, 64(R11)
	VMOVUPD Y13, 96(R11)
	VMOVUPD Y14, 128(R11)
	VMOVUPD Y15, 160(R11)
	VZEROUPPER
	RET

// func ppoFullVecAVX2(mask *bool, lp, old, adv, ent, ref, grad, gradEnt *float64, n int, k *ppoFullConsts, acc *[6][4]float64)
//
// ppoVecAVX2 plus the entropy bonus and the k3 KL loss in the same pass
// (ref = lp and a zero KL weight give the entropy bonus alone). Extra
// per token, with x = ref − lp, xc = clamp(x, ±20), e = e^xc:
//   k3 = min(e − xc − 1, 10), dk3 = (x = xc ∧ k3 < 10) ? 1 − e : 0, or −x
//   when straight-through; g = on·(w·grad + klW·dk3), gEnt = on·entGrad.
// acc: Σ on·(ℓ + finiteness), Σ on·dc, Σ on·(1 + 2^26·clip), Σ on·lower,
// Σ on·entropy, Σ on·(k3 + finiteness of x).
//
// Extra constants after ppoVecConsts: 768 entGrad, 800 klW, 832 10,
// 864 straight-through mask, 896 2^26.
TEXT ·ppoFullVecAVX2(SB), NOSPLIT, $0-88
	MOVQ mask+0(FP), SI
	MOVQ lp+8(FP), DI
	MOVQ old+16(FP), R8
	MOVQ adv+24(FP), R9
	MOVQ ent+32(FP), R12
	MOVQ ref+40(FP), R13
	MOVQ grad+48(FP), R10
	MOVQ gradEnt+56(FP), AX
	MOVQ n+64(FP), BX
	MOVQ k+72(FP), DX
	MOVQ acc+80(FP), R11
	XORQ CX, CX
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
	VXORPD Y12, Y12, Y12
	VXORPD Y13, Y13, Y13
	VXORPD Y14, Y14, Y14
	VXORPD Y15, Y15, Y15

fullloop:
	CMPQ CX, BX
	JGE  fulldone

	VPMOVZXBQ (SI)(CX*1), Y0
	VPXOR     Y1, Y1, Y1
	VPSUBQ    Y0, Y1, Y0 // on

	VMOVUPD (DI)(CX*8), Y1
	VMOVUPD (R13)(CX*8), Y4
	VSUBPD  Y1, Y4, Y4     // x = ref − lp
	VSUBPD  (R8)(CX*8), Y1, Y1 // d
	VMOVUPD (R9)(CX*8), Y2 // A

	// finiteness of d and A into Σℓ; of x into Σk3 (below)
	VADDPD Y2, Y1, Y3
	VSUBPD Y3, Y3, Y3
	VANDPD Y0, Y3, Y3
	VADDPD Y3, Y10, Y10

	// entropy: Σ on·H (a NaN or Inf shows in the sum), gEnt = on·entGrad
	VMOVUPD (R12)(CX*8), Y3
	VANDPD  Y0, Y3, Y3
	VADDPD  Y3, Y14, Y14
	VANDPD  768(DX), Y0, Y3
	VMOVUPD Y3, (AX)(CX*8)

	// k3 of x; x and the inner-clamp test are reloaded after the
	// polynomial, which needs their registers
	VMAXPD       0(DX), Y4, Y5
	VMINPD       32(DX), Y5, Y5 // xc
	VSUBPD       Y4, Y4, Y3     // x − x: finiteness of ref
	VANDPD       Y0, Y3, Y3
	VADDPD       Y3, Y15, Y15
	VMULPD       64(DX), Y5, Y8
	VROUNDPD     $0, Y8, Y8
	VMOVUPD      Y5, Y9
	VFNMADD231PD 96(DX), Y8, Y9
	VFNMADD231PD 128(DX), Y8, Y9
	EXP3(Y9, Y3, Y4, Y7, Y6)
	VCVTPD2DQY   Y8, X8
	VPMOVSXDQ    X8, Y8
	VPSLLQ       $52, Y8, Y8
	VPADDQ       Y8, Y7, Y7 // e
	VSUBPD       Y5, Y7, Y9
	VSUBPD       736(DX), Y9, Y9 // e − xc − 1
	VCMPPD       $0x0e, 832(DX), Y9, Y8 // outer clamp active: k3 > 10
	VMINPD       832(DX), Y9, Y9
	VANDPD       Y0, Y9, Y9
	VADDPD       Y9, Y15, Y15
	VMOVUPD      (R13)(CX*8), Y4
	VSUBPD       (DI)(CX*8), Y4, Y4 // x again
	VCMPPD       $0x00, Y5, Y4, Y6  // inner clamp inactive: x == xc
	VMOVUPD      736(DX), Y9
	VSUBPD       Y7, Y9, Y9 // 1 − e
	VANDPD       Y6, Y9, Y9
	VANDNPD      Y9, Y8, Y9
	VXORPD       Y7, Y7, Y7
	VSUBPD       Y4, Y7, Y7 // −x
	VMOVUPD      864(DX), Y8
	VBLENDVPD    Y8, Y7, Y9, Y9
	VMULPD       800(DX), Y9, Y9 // klW·dk3

	// PPO, as in ppoVecAVX2, with Y1 free after the clamp
	VMAXPD       0(DX), Y1, Y3
	VMINPD       32(DX), Y3, Y3 // dc
	VCMPPD       $0x00, Y3, Y1, Y4 // in range
	VANDPD       Y0, Y3, Y5
	VADDPD       Y5, Y11, Y11
	VMULPD       64(DX), Y3, Y5
	VROUNDPD     $0, Y5, Y5
	VFNMADD231PD 96(DX), Y5, Y3
	VFNMADD231PD 128(DX), Y5, Y3
	EXP3(Y3, Y7, Y8, Y6, Y1)
	VCVTPD2DQY   Y5, X1
	VPMOVSXDQ    X1, Y1
	VPSLLQ       $52, Y1, Y1
	VPADDQ       Y1, Y6, Y6 // ρ

	VXORPD    Y7, Y7, Y7
	VSUBPD    Y2, Y7, Y7    // −A
	VMULPD    Y6, Y7, Y8    // ℓ1
	VMAXPD    608(DX), Y6, Y6
	VMINPD    640(DX), Y6, Y6
	VMULPD    Y6, Y7, Y6    // ℓ2
	VCMPPD    $0x0e, Y8, Y6, Y5 // clip
	VBLENDVPD Y5, Y6, Y8, Y3 // ℓc
	VANDNPD   Y8, Y5, Y8    // grad
	VANDPD    Y0, Y5, Y5
	VANDPD    896(DX), Y5, Y5
	VANDPD    736(DX), Y0, Y1
	VADDPD    Y1, Y5, Y5
	VADDPD    Y5, Y12, Y12  // on + 2^26·clip

	VMULPD    672(DX), Y7, Y7   // ℓ3
	VCMPPD    $0x0e, Y7, Y3, Y5 // ℓc > ℓ3
	VXORPD    Y1, Y1, Y1
	VCMPPD    $0x01, Y1, Y2, Y1 // A < 0
	VANDPD    Y1, Y5, Y5        // lower
	VBLENDVPD Y5, Y7, Y3, Y3    // ℓ
	VANDNPD   Y8, Y5, Y8
	VANDPD    Y4, Y8, Y8
	VMULPD    704(DX), Y8, Y8
	VADDPD    Y9, Y8, Y8
	VANDPD    Y0, Y8, Y8
	VMOVUPD   Y8, (R10)(CX*8)

	VANDPD Y0, Y5, Y5
	VANDPD 736(DX), Y5, Y5
	VADDPD Y5, Y13, Y13
	VANDPD Y0, Y3, Y3
	VADDPD Y3, Y10, Y10

	ADDQ $4, CX
	JMP  fullloop

fulldone:
	VMOVUPD Y10, 0(R11)
	VMOVUPD Y11, 32(R11)
	VMOVUPD Y12, 64(R11)
	VMOVUPD Y13, 96(R11)
	VMOVUPD Y14, 128(R11)
	VMOVUPD Y15, 160(R11)
	VZEROUPPER
	RET

// func valueVecAVX2(mask *bool, v, vold, ret, grad *float64, n int, k *valueVecConsts, acc *[4][4]float64)
//
// The clipped value loss of ValueLoss, four tokens per step (n a multiple of
// 4): vc = clamp(v, vold − ε, vold + ε), ℓ1 = (v − R)², ℓ2 = (vc − R)²,
// clip = ℓ2 > ℓ1, ℓ = clip ? ℓ2 : ℓ1 (halved by the caller),
// g = on·w·(clip ? 0 : v − R).
// acc: Σ on·(ℓ + finiteness), Σ on·clip, Σ on·v, Σ on.
// Constants (four lanes each): 0 ε, 32 w, 64 1.0.
TEXT ·valueVecAVX2(SB), NOSPLIT, $0-64
	MOVQ mask+0(FP), SI
	MOVQ v+8(FP), DI
	MOVQ vold+16(FP), R8
	MOVQ ret+24(FP), R9
	MOVQ grad+32(FP), R10
	MOVQ n+40(FP), BX
	MOVQ k+48(FP), DX
	MOVQ acc+56(FP), R11
	XORQ CX, CX
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
	VXORPD Y12, Y12, Y12
	VXORPD Y13, Y13, Y13

valueloop:
	CMPQ CX, BX
	JGE  valuedone

	VPMOVZXBQ (SI)(CX*1), Y0
	VPXOR     Y1, Y1, Y1
	VPSUBQ    Y0, Y1, Y0 // on

	VMOVUPD (DI)(CX*8), Y1 // v
	VMOVUPD (R8)(CX*8), Y2 // vold
	VMOVUPD (R9)(CX*8), Y3 // R

	VADDPD Y2, Y1, Y4
	VADDPD Y3, Y4, Y4
	VSUBPD Y4, Y4, Y4 // finiteness
	VANDPD Y0, Y4, Y4
	VADDPD Y4, Y10, Y10

	VSUBPD 0(DX), Y2, Y4 // vold − ε
	VADDPD 0(DX), Y2, Y5 // vold + ε
	VMAXPD Y4, Y1, Y6
	VMINPD Y5, Y6, Y6    // vc
	VSUBPD Y3, Y1, Y7    // v − R
	VSUBPD Y3, Y6, Y6    // vc − R
	VMULPD Y7, Y7, Y8    // ℓ1
	VMULPD Y6, Y6, Y6    // ℓ2
	VCMPPD $0x0e, Y8, Y6, Y5 // clip
	VBLENDVPD Y5, Y6, Y8, Y8 // ℓ
	VANDPD  Y0, Y8, Y8
	VADDPD  Y8, Y10, Y10
	VANDNPD Y7, Y5, Y7
	VANDPD  Y0, Y7, Y7
	VMULPD  32(DX), Y7, Y7
	VMOVUPD Y7, (R10)(CX*8)

	VANDPD Y0, Y5, Y5
	VANDPD 64(DX), Y5, Y5
	VADDPD Y5, Y11, Y11
	VANDPD Y0, Y1, Y1
	VADDPD Y1, Y12, Y12
	VANDPD 64(DX), Y0, Y1
	VADDPD Y1, Y13, Y13

	ADDQ $4, CX
	JMP  valueloop

valuedone:
	VMOVUPD Y10, 0(R11)
	VMOVUPD Y11, 32(R11)
	VMOVUPD Y12, 64(R11)
	VMOVUPD Y13, 96(R11)
	VZEROUPPER
	RET

// func gspoSumAVX2(mask *bool, lp, old, adv *float64, n int, acc *[3][4]float64)
//
// GSPO's first pass over a sequence (n a multiple of 4): per lane
// Σ on·(lp − old), Σ on·((d + A) − (d + A)) (finiteness), Σ on.
TEXT ·gspoSumAVX2(SB), NOSPLIT, $0-48
	MOVQ mask+0(FP), SI
	MOVQ lp+8(FP), DI
	MOVQ old+16(FP), R8
	MOVQ adv+24(FP), R9
	MOVQ n+32(FP), BX
	MOVQ acc+40(FP), R11
	XORQ CX, CX
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
	VXORPD Y12, Y12, Y12
	MOVQ   $0x3ff0000000000000, AX // 1.0
	MOVQ   AX, X9
	VPBROADCASTQ X9, Y9

gsumloop:
	CMPQ CX, BX
	JGE  gsumdone
	VPMOVZXBQ (SI)(CX*1), Y0
	VPXOR     Y1, Y1, Y1
	VPSUBQ    Y0, Y1, Y0 // on
	VMOVUPD   (DI)(CX*8), Y1
	VSUBPD    (R8)(CX*8), Y1, Y1 // d
	VADDPD    (R9)(CX*8), Y1, Y2
	VSUBPD    Y2, Y2, Y2
	VANDPD    Y0, Y2, Y2
	VADDPD    Y2, Y11, Y11
	VANDPD    Y0, Y1, Y1
	VADDPD    Y1, Y10, Y10
	VANDPD    Y9, Y0, Y1
	VADDPD    Y1, Y12, Y12
	ADDQ      $4, CX
	JMP       gsumloop

gsumdone:
	VMOVUPD Y10, 0(R11)
	VMOVUPD Y11, 32(R11)
	VMOVUPD Y12, 64(R11)
	VZEROUPPER
	RET

// func gspoLossAVX2(mask *bool, adv, grad *float64, n int, k *gspoVecConsts, acc *[2][4]float64)
//
// GSPO's second pass (n a multiple of 4), with the sequence's ratio s and
// clipped ratio sc: ℓ1 = −A·s, ℓ2 = −A·sc, clip = ℓ2 > ℓ1,
// ℓ = clip ? ℓ2 : ℓ1, g = on·gw·(clip ? 0 : ℓ1) where gw is w, or 0 when
// the sequence log-ratio was clamped. acc: Σ on·ℓ, Σ on·clip.
// Constants (four lanes each): 0 s, 32 sc, 64 gw, 96 1.0.
TEXT ·gspoLossAVX2(SB), NOSPLIT, $0-48
	MOVQ mask+0(FP), SI
	MOVQ adv+8(FP), R9
	MOVQ grad+16(FP), R10
	MOVQ n+24(FP), BX
	MOVQ k+32(FP), DX
	MOVQ acc+40(FP), R11
	XORQ CX, CX
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11

glossloop:
	CMPQ CX, BX
	JGE  glossdone
	VPMOVZXBQ (SI)(CX*1), Y0
	VPXOR     Y1, Y1, Y1
	VPSUBQ    Y0, Y1, Y0 // on
	VSUBPD    (R9)(CX*8), Y1, Y2 // −A
	VMULPD    0(DX), Y2, Y3      // ℓ1
	VMULPD    32(DX), Y2, Y4     // ℓ2
	VCMPPD    $0x0e, Y3, Y4, Y5  // clip
	VBLENDVPD Y5, Y4, Y3, Y6     // ℓ
	VANDNPD   Y3, Y5, Y3         // grad
	VANDPD    Y0, Y3, Y3
	VMULPD    64(DX), Y3, Y3
	VMOVUPD   Y3, (R10)(CX*8)
	VANDPD    Y0, Y6, Y6
	VADDPD    Y6, Y10, Y10
	VANDPD    Y0, Y5, Y5
	VANDPD    96(DX), Y5, Y5
	VADDPD    Y5, Y11, Y11
	ADDQ      $4, CX
	JMP       glossloop

glossdone:
	VMOVUPD Y10, 0(R11)
	VMOVUPD Y11, 32(R11)
	VZEROUPPER
	RET

// EXP3Z is EXP3 on eight lanes, the coefficients broadcast from the
// four-lane constant table.
#define EXP3Z(R, A, B, C, T) \
	VBROADCASTSD      448(DX), A \
	VFMADD213PD.BCST  480(DX), R, A \
	VFMADD213PD.BCST  512(DX), R, A \
	VFMADD213PD.BCST  544(DX), R, A \
	VFMADD213PD.BCST  576(DX), R, A \
	VBROADCASTSD      288(DX), B \
	VFMADD213PD.BCST  320(DX), R, B \
	VFMADD213PD.BCST  352(DX), R, B \
	VFMADD213PD.BCST  384(DX), R, B \
	VFMADD213PD.BCST  416(DX), R, B \
	VBROADCASTSD      160(DX), C \
	VFMADD213PD.BCST  192(DX), R, C \
	VFMADD213PD.BCST  224(DX), R, C \
	VFMADD213PD.BCST  256(DX), R, C \
	VMULPD            R, R, T \
	VMULPD            T, T, T \
	VMULPD            R, T, T \
	VFMADD213PD       B, T, C \
	VFMADD213PD       A, T, C

// func ppoVecAVX512(mask *bool, lp, old, adv, grad *float64, n int, k *ppoVecConsts, acc *[6][8]float64)
//
// ppoVecAVX2 on eight lanes (n a multiple of 8), with mask registers for
// the selections and merge-masked accumulation; the same constant table.
TEXT ·ppoVecAVX512(SB), NOSPLIT, $0-64
	MOVQ mask+0(FP), SI
	MOVQ lp+8(FP), DI
	MOVQ old+16(FP), R8
	MOVQ adv+24(FP), R9
	MOVQ grad+32(FP), R10
	MOVQ n+40(FP), BX
	MOVQ k+48(FP), DX
	MOVQ acc+56(FP), R11
	XORQ CX, CX
	VXORPD Z10, Z10, Z10
	VXORPD Z11, Z11, Z11
	VXORPD Z12, Z12, Z12
	VXORPD Z13, Z13, Z13
	VXORPD Z14, Z14, Z14
	VXORPD Z15, Z15, Z15

zloop:
	CMPQ CX, BX
	JGE  zdone

	VPMOVZXBQ (SI)(CX*1), Z0
	VPTESTMQ  Z0, Z0, K1 // on

	VMOVUPD (DI)(CX*8), Z1
	VSUBPD  (R8)(CX*8), Z1, Z1 // d
	VMOVUPD (R9)(CX*8), Z2     // A

	VADDPD Z2, Z1, Z3
	VSUBPD Z3, Z3, Z3
	VADDPD Z3, Z12, K1, Z12 // finiteness

	VMAXPD.BCST 0(DX), Z1, Z3
	VMINPD.BCST 32(DX), Z3, Z3 // dc
	VCMPPD      $0x00, Z3, Z1, K2 // in range
	VADDPD      Z3, Z11, K1, Z11

	VMULPD.BCST       64(DX), Z3, Z5
	VRNDSCALEPD       $0, Z5, Z5
	VFNMADD231PD.BCST 96(DX), Z5, Z3
	VFNMADD231PD.BCST 128(DX), Z5, Z3
	EXP3Z(Z3, Z7, Z8, Z6, Z9)
	VSCALEFPD         Z5, Z6, Z6 // ρ

	VXORPD      Z8, Z8, Z8
	VSUBPD      Z2, Z8, Z8 // −A
	VMULPD      Z6, Z8, Z9 // ℓ1
	VMAXPD.BCST 608(DX), Z6, Z7
	VMINPD.BCST 640(DX), Z7, Z7
	VMULPD      Z7, Z8, Z7        // ℓ2
	VCMPPD      $0x0e, Z9, Z7, K3 // clip
	VBLENDMPD   Z7, Z9, K3, Z3    // ℓc
	VMULPD.BCST 672(DX), Z8, Z7   // ℓ3
	VCMPPD      $0x0e, Z7, Z3, K4 // ℓc > ℓ3
	VXORPD      Z6, Z6, Z6
	VCMPPD      $0x01, Z6, Z2, K5 // A < 0
	KANDW       K5, K4, K4        // lower
	VBLENDMPD   Z7, Z3, K4, Z3    // ℓ

	KANDW       K1, K2, K6
	KANDNW      K6, K3, K6
	KANDNW      K6, K4, K6
	VMULPD.BCST 704(DX), Z9, Z9
	VMOVAPD.Z   Z9, K6, Z9
	VMOVUPD     Z9, (R10)(CX*8)

	VADDPD      Z3, Z10, K1, Z10
	VADDPD.BCST 736(DX), Z13, K1, Z13
	KANDW       K1, K3, K7
	VADDPD.BCST 736(DX), Z14, K7, Z14
	KANDW       K1, K4, K7
	VADDPD.BCST 736(DX), Z15, K7, Z15

	ADDQ $8, CX
	JMP  zloop

zdone:
	VMOVUPD Z10, 0(R11)
	VMOVUPD Z11, 64(R11)
	VMOVUPD Z12, 128(R11)
	VMOVUPD Z13, 192(R11)
	VMOVUPD Z14, 256(R11)
	VMOVUPD Z15, 320(R11)
	VZEROUPPER
	RET

// func ppoFullVecAVX512(mask *bool, lp, old, adv, ent, ref, grad, gradEnt *float64, n int, k *ppoFullConsts, acc *[6][8]float64)
//
// ppoFullVecAVX2 on eight lanes (n a multiple of 8); the same constant table
// and accumulator layout.
TEXT ·ppoFullVecAVX512(SB), NOSPLIT, $0-88
	MOVQ mask+0(FP), SI
	MOVQ lp+8(FP), DI
	MOVQ old+16(FP), R8
	MOVQ adv+24(FP), R9
	MOVQ ent+32(FP), R12
	MOVQ ref+40(FP), R13
	MOVQ grad+48(FP), R10
	MOVQ gradEnt+56(FP), AX
	MOVQ n+64(FP), BX
	MOVQ k+72(FP), DX
	MOVQ acc+80(FP), R11
	XORQ CX, CX
	VXORPD Z10, Z10, Z10
	VXORPD Z11, Z11, Z11
	VXORPD Z12, Z12, Z12
	VXORPD Z13, Z13, Z13
	VXORPD Z14, Z14, Z14
	VXORPD Z15, Z15, Z15
	VPBROADCASTQ 864(DX), Z20
	VPTESTMQ     Z20, Z20, K5 // straight-through: all lanes or none
	KMOVW        K5, K7       // kept in K7's place below; K5 is reused

zfullloop:
	CMPQ CX, BX
	JGE  zfulldone

	VPMOVZXBQ (SI)(CX*1), Z0
	VPTESTMQ  Z0, Z0, K1 // on

	VMOVUPD (DI)(CX*8), Z1
	VMOVUPD (R13)(CX*8), Z4
	VSUBPD  Z1, Z4, Z4         // x = ref − lp
	VSUBPD  (R8)(CX*8), Z1, Z1 // d
	VMOVUPD (R9)(CX*8), Z2     // A

	VADDPD Z2, Z1, Z3
	VSUBPD Z3, Z3, Z3
	VADDPD Z3, Z10, K1, Z10 // finiteness of d and A

	VADDPD       (R12)(CX*8), Z14, K1, Z14 // Σ on·H
	VBROADCASTSD 768(DX), Z3
	VMOVAPD.Z    Z3, K1, Z3
	VMOVUPD      Z3, (AX)(CX*8) // gEnt

	// k3 of x
	VMAXPD.BCST       0(DX), Z4, Z5
	VMINPD.BCST       32(DX), Z5, Z5    // xc
	VCMPPD            $0x00, Z5, Z4, K2 // inner clamp inactive
	VSUBPD            Z4, Z4, Z3
	VADDPD            Z3, Z15, K1, Z15  // finiteness of ref
	VMULPD.BCST       64(DX), Z5, Z8
	VRNDSCALEPD       $0, Z8, Z8
	VMOVAPD           Z5, Z9
	VFNMADD231PD.BCST 96(DX), Z8, Z9
	VFNMADD231PD.BCST 128(DX), Z8, Z9
	EXP3Z(Z9, Z16, Z17, Z7, Z18)
	VSCALEFPD         Z8, Z7, Z7 // e
	VSUBPD            Z5, Z7, Z9
	VSUBPD.BCST       736(DX), Z9, Z9 // e − xc − 1
	VCMPPD.BCST       $0x0e, 832(DX), Z9, K3 // outer clamp active
	VMINPD.BCST       832(DX), Z9, Z9
	VADDPD            Z9, Z15, K1, Z15
	VBROADCASTSD      736(DX), Z9
	VSUBPD            Z7, Z9, Z9 // 1 − e
	KANDNW            K2, K3, K4
	VMOVAPD.Z         Z9, K4, Z9
	VXORPD            Z17, Z17, Z17
	VSUBPD            Z4, Z17, Z17 // −x
	VMOVAPD           Z17, K7, Z9  // straight-through gradient
	VMULPD.BCST       800(DX), Z9, Z9 // klW·dk3

	// PPO
	VMAXPD.BCST       0(DX), Z1, Z3
	VMINPD.BCST       32(DX), Z3, Z3    // dc
	VCMPPD            $0x00, Z3, Z1, K2 // in range
	VADDPD            Z3, Z11, K1, Z11
	VMULPD.BCST       64(DX), Z3, Z5
	VRNDSCALEPD       $0, Z5, Z5
	VFNMADD231PD.BCST 96(DX), Z5, Z3
	VFNMADD231PD.BCST 128(DX), Z5, Z3
	EXP3Z(Z3, Z16, Z17, Z6, Z18)
	VSCALEFPD         Z5, Z6, Z6 // ρ

	VXORPD      Z8, Z8, Z8
	VSUBPD      Z2, Z8, Z8  // −A
	VMULPD      Z6, Z8, Z19 // ℓ1
	VMAXPD.BCST 608(DX), Z6, Z7
	VMINPD.BCST 640(DX), Z7, Z7
	VMULPD      Z7, Z8, Z7         // ℓ2
	VCMPPD      $0x0e, Z19, Z7, K3 // clip
	VBLENDMPD   Z7, Z19, K3, Z3    // ℓc
	VMULPD.BCST 672(DX), Z8, Z7    // ℓ3
	VCMPPD      $0x0e, Z7, Z3, K4  // ℓc > ℓ3
	VXORPD      Z6, Z6, Z6
	VCMPPD      $0x01, Z6, Z2, K5  // A < 0
	KANDW       K5, K4, K4         // lower
	VBLENDMPD   Z7, Z3, K4, Z3     // ℓ

	KANDNW      K2, K3, K6
	KANDNW      K6, K4, K6
	VMULPD.BCST 704(DX), Z19, Z19
	VMOVAPD.Z   Z19, K6, Z19
	VADDPD      Z9, Z19, Z19
	VMOVAPD.Z   Z19, K1, Z19
	VMOVUPD     Z19, (R10)(CX*8)

	VADDPD      Z3, Z10, K1, Z10
	VADDPD.BCST 736(DX), Z12, K1, Z12
	KANDW       K1, K3, K6
	VADDPD.BCST 896(DX), Z12, K6, Z12 // + 2^26 per clip
	KANDW       K1, K4, K6
	VADDPD.BCST 736(DX), Z13, K6, Z13

	ADDQ $8, CX
	JMP  zfullloop

zfulldone:
	VMOVUPD Z10, 0(R11)
	VMOVUPD Z11, 64(R11)
	VMOVUPD Z12, 128(R11)
	VMOVUPD Z13, 192(R11)
	VMOVUPD Z14, 256(R11)
	VMOVUPD Z15, 320(R11)
	VZEROUPPER
	RET

// func gspoSumAVX512(mask *bool, lp, old, adv *float64, n int, acc *[3][8]float64)
//
// gspoSumAVX2 on eight lanes (n a multiple of 8).
TEXT ·gspoSumAVX512(SB), NOSPLIT, $0-48
	MOVQ mask+0(FP), SI
	MOVQ lp+8(FP), DI
	MOVQ old+16(FP), R8
	MOVQ adv+24(FP), R9
	MOVQ n+32(FP), BX
	MOVQ acc+40(FP), R11
	XORQ CX, CX
	VXORPD Z10, Z10, Z10
	VXORPD Z11, Z11, Z11
	VXORPD Z12, Z12, Z12
	MOVQ   $0x3ff0000000000000, AX // 1.0
	VPBROADCASTQ AX, Z9

zgsumloop:
	CMPQ CX, BX
	JGE  zgsumdone
	VPMOVZXBQ (SI)(CX*1), Z0
	VPTESTMQ  Z0, Z0, K1
	VMOVUPD   (DI)(CX*8), Z1
	VSUBPD    (R8)(CX*8), Z1, Z1 // d
	VADDPD    (R9)(CX*8), Z1, Z2
	VSUBPD    Z2, Z2, Z2
	VADDPD    Z2, Z11, K1, Z11
	VADDPD    Z1, Z10, K1, Z10
	VADDPD    Z9, Z12, K1, Z12
	ADDQ      $8, CX
	JMP       zgsumloop

zgsumdone:
	VMOVUPD Z10, 0(R11)
	VMOVUPD Z11, 64(R11)
	VMOVUPD Z12, 128(R11)
	VZEROUPPER
	RET

// func gspoLossAVX512(mask *bool, adv, grad *float64, n int, k *gspoVecConsts, acc *[2][8]float64)
//
// gspoLossAVX2 on eight lanes (n a multiple of 8).
TEXT ·gspoLossAVX512(SB), NOSPLIT, $0-48
	MOVQ mask+0(FP), SI
	MOVQ adv+8(FP), R9
	MOVQ grad+16(FP), R10
	MOVQ n+24(FP), BX
	MOVQ k+32(FP), DX
	MOVQ acc+40(FP), R11
	XORQ CX, CX
	VXORPD Z10, Z10, Z10
	VXORPD Z11, Z11, Z11
	VXORPD Z1, Z1, Z1

zglossloop:
	CMPQ CX, BX
	JGE  zglossdone
	VPMOVZXBQ   (SI)(CX*1), Z0
	VPTESTMQ    Z0, Z0, K1
	VSUBPD      (R9)(CX*8), Z1, Z2 // −A
	VMULPD.BCST 0(DX), Z2, Z3      // ℓ1
	VMULPD.BCST 32(DX), Z2, Z4     // ℓ2
	VCMPPD      $0x0e, Z3, Z4, K2  // clip
	VBLENDMPD   Z4, Z3, K2, Z6     // ℓ
	KANDNW      K1, K2, K3         // on ∧ ¬clip
	VMULPD.BCST 64(DX), Z3, Z3
	VMOVAPD.Z   Z3, K3, Z3
	VMOVUPD     Z3, (R10)(CX*8)
	VADDPD      Z6, Z10, K1, Z10
	KANDW       K1, K2, K4
	VADDPD.BCST 96(DX), Z11, K4, Z11
	ADDQ        $8, CX
	JMP         zglossloop

zglossdone:
	VMOVUPD Z10, 0(R11)
	VMOVUPD Z11, 64(R11)
	VZEROUPPER
	RET
