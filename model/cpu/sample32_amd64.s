#include "textflag.h"
#include "exp32_amd64.h"

// func sumExp32BlocksAVX512(row *float32, n, blk int, invT, m float32, c *[12]float32, sums *float64)
//
// The rollout copy's first pass (sample32.go): for each block of blk
// logits of row (n and blk multiples of 16; the last block may be
// shorter), the sum of e = exp32(l·invT − m) over it, sixteen lanes at a
// time: x = l·invT − m in float32 (two roundings), e by exp32AVX512's
// operations (0 below expLo; a NaN passes through), each lane adding its
// e in order in float32, then the lanes in float64: lane j + lane j+8,
// then j + j+4, j + j+2, 0 + 1, into sums[b]. blockSums32 is the loop.
TEXT ·sumExp32BlocksAVX512(SB), NOSPLIT, $0-48
	MOVQ row+0(FP), SI
	MOVQ n+8(FP), R8
	MOVQ blk+16(FP), R9
	VBROADCASTSS invT+24(FP), Z28
	VBROADCASTSS m+28(FP), Z29
	MOVQ c+32(FP), BX
	MOVQ sums+40(FP), DI
	EXP32CONSTS(BX)
	SHRQ $4, R8 // vectors left in the row
	SHRQ $4, R9 // vectors a block

sblock:
	TESTQ R8, R8
	JZ    sdone
	MOVQ  R9, CX
	CMPQ  R8, CX
	CMOVQLT R8, CX // this block's vectors
	SUBQ  CX, R8
	VPXORD Z8, Z8, Z8

svec:
	VMOVUPS (SI), Z0
	VMULPS  Z28, Z0, Z0        // l·invT
	VSUBPS  Z29, Z0, Z0        // x = − m
	EXP32                      // Z5 = e^x, 0 below expLo
	VADDPS  Z5, Z8, Z8         // each lane's sum, in order
	ADDQ $64, SI
	DECQ CX
	JNZ  svec

	VCVTPS2PD Y8, Z9           // lanes 0-7
	VEXTRACTF32X8 $1, Z8, Y10
	VCVTPS2PD Y10, Z10         // lanes 8-15
	VADDPD    Z10, Z9, Z9      // j + (j+8)
	VEXTRACTF64X4 $1, Z9, Y10
	VADDPD    Y10, Y9, Y9      // j + (j+4)
	VEXTRACTF64X2 $1, Y9, X10
	VADDPD    X10, X9, X9      // j + (j+2)
	VPERMILPD $1, X9, X10
	VADDSD    X10, X9, X9      // 0 + 1
	VMOVSD    X9, (DI)
	ADDQ $8, DI
	JMP  sblock

sdone:
	VZEROUPPER
	RET
