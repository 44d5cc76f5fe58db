#include "textflag.h"

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
	VBROADCASTSS 0(DX), Z16
	VBROADCASTSS 4(DX), Z17
	VBROADCASTSS 8(DX), Z18
	VBROADCASTSS 12(DX), Z19
	VBROADCASTSS 16(DX), Z20
	VBROADCASTSS 20(DX), Z21
	VBROADCASTSS 24(DX), Z22
	VBROADCASTSS 28(DX), Z23
	VBROADCASTSS 32(DX), Z24
	VBROADCASTSS 36(DX), Z25
	VBROADCASTSS 40(DX), Z26
	MOVL $127, AX
	VPBROADCASTD AX, Z27
	KXORW K3, K3, K3
	SHRQ $4, CX
	JZ   done512

loop512:
	VMOVUPS (SI), Z0
	VMULPS  Z16, Z0, Z1        // x·log2e
	VADDPS  Z17, Z1, Z1        // + 0.5
	VRNDSCALEPS $9, Z1, Z1     // n = floor (round down, no precision exception)
	VMULPS  Z18, Z1, Z2        // n·ln2hi
	VSUBPS  Z2, Z0, Z2         // r = x − n·ln2hi
	VMULPS  Z19, Z1, Z3        // n·ln2lo
	VSUBPS  Z3, Z2, Z2         // r −= n·ln2lo
	VMULPS  Z20, Z2, Z3        // p = r/720
	VADDPS  Z21, Z3, Z3
	VMULPS  Z2, Z3, Z3         // p = r(1/120 + p)
	VADDPS  Z22, Z3, Z3
	VMULPS  Z2, Z3, Z3         // p = r(1/24 + p)
	VADDPS  Z23, Z3, Z3
	VMULPS  Z2, Z3, Z3         // p = r(1/6 + p)
	VADDPS  Z17, Z3, Z3
	VMULPS  Z2, Z3, Z3         // p = r(0.5 + p)
	VADDPS  Z24, Z3, Z3
	VMULPS  Z2, Z3, Z3         // p = r(1 + p)
	VADDPS  Z24, Z3, Z3        // p = 1 + p
	VCVTTPS2DQ Z1, Z4
	VPADDD  Z27, Z4, Z4
	VPSLLD  $23, Z4, Z4        // 2^n
	VMULPS  Z4, Z3, Z3
	VCMPPS  $0x1d, Z25, Z0, K1 // x ≥ expLo (false for NaN)
	VCMPPS  $0x03, Z0, Z0, K2  // NaN
	VCMPPS  $0x1e, Z26, Z0, K4 // x > expHi
	KORW    K2, K1, K1         // keep NaN lanes too (reported)
	VMOVUPS.Z Z3, K1, Z5       // 0 below expLo
	KORW    K2, K4, K4
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
