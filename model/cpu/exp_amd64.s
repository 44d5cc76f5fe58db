#include "textflag.h"
#include "exp32_amd64.h"

// exp32's operations (model/exp.go), lane by lane, in its order: separate
// multiplies and adds (no FMA), floor by rounding down, the scale 2^n built
// in the exponent field. Lanes below expLo are set to 0; lanes above expHi
// or NaN are reported (the caller redoes them).
//
// Constants c[0..10]: log2e, 0.5, ln2hi, ln2lo, 1/720, 1/120, 1/24, 1/6,
// 1, expLo, expHi.

// func exp32AVX512(dst, src *float32, n int, c *[12]float32) (special bool)
TEXT ·exp32AVX512(SB), NOSPLIT, $0-33
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ c+24(FP), DX
	EXP32CONSTS(DX)
	KXORW K3, K3, K3
	SHRQ $4, CX
	JZ   done512

loop512:
	VMOVUPS (SI), Z0
	EXP32                      // Z5 = e^x, 0 below expLo; K2 the NaN lanes
	VCMPPS  $0x1e, Z26, Z0, K4 // x > expHi
	KORW    K2, K4, K4         // NaN and above expHi: reported
	KORW    K4, K3, K3
	VMOVUPS Z5, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop512

done512:
	KORTESTW K3, K3
	SETNE    special+32(FP)
	VZEROUPPER
	RET

// func exp32AVX2(dst, src *float32, n int, c *[12]float32) (special bool)
TEXT ·exp32AVX2(SB), NOSPLIT, $0-33
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ c+24(FP), DX
	VBROADCASTSS 0(DX), Y8
	VBROADCASTSS 4(DX), Y9
	VBROADCASTSS 8(DX), Y10
	VBROADCASTSS 12(DX), Y11
	VBROADCASTSS 32(DX), Y12
	VBROADCASTSS 36(DX), Y13
	VBROADCASTSS 40(DX), Y14
	MOVL $127, AX
	MOVQ AX, X15
	VPBROADCASTD X15, Y15
	VXORPS Y7, Y7, Y7          // reported lanes
	SHRQ $3, CX
	JZ   done2

loop2:
	VMOVUPS (SI), Y0
	VMULPS  Y8, Y0, Y1         // x·log2e
	VADDPS  Y9, Y1, Y1         // + 0.5
	VROUNDPS $9, Y1, Y1        // n = floor
	VMULPS  Y10, Y1, Y2        // n·ln2hi
	VSUBPS  Y2, Y0, Y2         // r = x − n·ln2hi
	VMULPS  Y11, Y1, Y3        // n·ln2lo
	VSUBPS  Y3, Y2, Y2         // r −= n·ln2lo
	VBROADCASTSS 16(DX), Y3
	VMULPS  Y3, Y2, Y3         // p = r/720
	VBROADCASTSS 20(DX), Y4
	VADDPS  Y4, Y3, Y3
	VMULPS  Y2, Y3, Y3         // p = r(1/120 + p)
	VBROADCASTSS 24(DX), Y4
	VADDPS  Y4, Y3, Y3
	VMULPS  Y2, Y3, Y3         // p = r(1/24 + p)
	VBROADCASTSS 28(DX), Y4
	VADDPS  Y4, Y3, Y3
	VMULPS  Y2, Y3, Y3         // p = r(1/6 + p)
	VADDPS  Y9, Y3, Y3
	VMULPS  Y2, Y3, Y3         // p = r(0.5 + p)
	VADDPS  Y12, Y3, Y3
	VMULPS  Y2, Y3, Y3         // p = r(1 + p)
	VADDPS  Y12, Y3, Y3        // p = 1 + p
	VCVTTPS2DQ Y1, Y4
	VPADDD  Y15, Y4, Y4
	VPSLLD  $23, Y4, Y4        // 2^n
	VMULPS  Y4, Y3, Y3
	VCMPPS  $0x11, Y13, Y0, Y5 // x < expLo (false for NaN)
	VANDNPS Y3, Y5, Y3         // 0 there
	VCMPPS  $0x03, Y0, Y0, Y6  // NaN
	VORPS   Y6, Y7, Y7
	VCMPPS  $0x1e, Y14, Y0, Y6 // x > expHi
	VORPS   Y6, Y7, Y7
	VMOVUPS Y3, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  loop2

done2:
	VMOVMSKPS Y7, AX
	TESTL AX, AX
	SETNE special+32(FP)
	VZEROUPPER
	RET
