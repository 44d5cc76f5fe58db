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
	EXP32YCONSTS(DX)
	VBROADCASTSS 40(DX), Y14 // expHi
	VXORPS Y7, Y7, Y7          // reported lanes
	SHRQ $3, CX
	JZ   done2

loop2:
	VMOVUPS (SI), Y0
	EXP32Y                     // Y3 = e^x, 0 below expLo
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
