#include "textflag.h"

// func ropeRowAVX512(row *float32, heads, hs int, cos, sin *float64, sign float64)
//
// Turns each of the row's heads (hs values, hs/2 a multiple of 8) as
// rope's loop does, eight pairs at a time, its operations in its order
// in float64: v[i] = a·cos − (sign·b)·sin, v[i+hs/2] = b·cos + (sign·a)·sin,
// each rounded to float32 to nearest even, so the loop's bits.
TEXT ·ropeRowAVX512(SB), NOSPLIT, $0-48
	MOVQ row+0(FP), DI
	MOVQ heads+8(FP), BX
	MOVQ hs+16(FP), R8
	MOVQ cos+24(FP), R9
	MOVQ sin+32(FP), R10
	VBROADCASTSD sign+40(FP), Z15
	MOVQ R8, R11
	SHLQ $1, R11 // half a head in bytes (hs/2 float32)
	SHRQ $4, R8  // vectors of eight pairs a head
	TESTQ BX, BX
	JZ    rdone

rhead:
	MOVQ DI, SI  // the head's first half
	MOVQ R9, AX  // cos
	MOVQ R10, DX // sin
	MOVQ R8, CX

rpairs:
	VCVTPS2PD (SI), Z0       // a
	VCVTPS2PD (SI)(R11*1), Z1 // b
	VMOVUPD (AX), Z2         // cos
	VMOVUPD (DX), Z3         // sin
	VMULPD  Z2, Z0, Z4       // a·cos
	VMULPD  Z15, Z1, Z5      // sign·b
	VMULPD  Z3, Z5, Z5       // ·sin
	VSUBPD  Z5, Z4, Z4       // a·cos − sign·b·sin
	VMULPD  Z2, Z1, Z6       // b·cos
	VMULPD  Z15, Z0, Z7      // sign·a
	VMULPD  Z3, Z7, Z7       // ·sin
	VADDPD  Z7, Z6, Z6       // b·cos + sign·a·sin
	VCVTPD2PS Z4, Y4
	VCVTPD2PS Z6, Y6
	VMOVUPS Y4, (SI)
	VMOVUPS Y6, (SI)(R11*1)
	ADDQ $32, SI
	ADDQ $64, AX
	ADDQ $64, DX
	DECQ CX
	JNZ  rpairs
	LEAQ (DI)(R11*2), DI // the next head
	DECQ BX
	JNZ  rhead
	VZEROUPPER

rdone:
	RET
