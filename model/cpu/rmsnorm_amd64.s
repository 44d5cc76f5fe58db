#include "textflag.h"
#include "transpose8_amd64.h"

// RMSNorm's loops for the float32 device (rmsnorm.go), with their bits.

// func sumSquares8AVX512(x *float32, ld uintptr, n8 int, ss *[8]float64)
//
// ss[i] += Σ float64(v)² over the first 8·n8 values of row i (rows ld
// bytes apart from x), in order, for eight rows at once: eight columns of
// the eight rows transposed (a lane a row), each widened and added as
// ss += v·v by a fused multiply-add, exact here because the product of
// two float32 values is exact in float64: the bits of sumSquares's loop.
TEXT ·sumSquares8AVX512(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), AX
	MOVQ ld+8(FP), R11
	LEAQ (AX)(R11*1), BX
	LEAQ (BX)(R11*1), CX
	LEAQ (CX)(R11*1), DX
	LEAQ (DX)(R11*1), SI
	LEAQ (SI)(R11*1), DI
	LEAQ (DI)(R11*1), R8
	LEAQ (R8)(R11*1), R9
	MOVQ n8+16(FP), R12
	MOVQ ss+24(FP), R13
	VMOVUPD (R13), Z30
	XORQ R10, R10
	TESTQ R12, R12
	JZ    sdone

sloop:
	LOAD8
	TRANSPOSE8
	VCVTPS2PD Y8, Z16
	VFMADD231PD Z16, Z16, Z30
	VCVTPS2PD Y9, Z16
	VFMADD231PD Z16, Z16, Z30
	VCVTPS2PD Y10, Z16
	VFMADD231PD Z16, Z16, Z30
	VCVTPS2PD Y11, Z16
	VFMADD231PD Z16, Z16, Z30
	VCVTPS2PD Y12, Z16
	VFMADD231PD Z16, Z16, Z30
	VCVTPS2PD Y13, Z16
	VFMADD231PD Z16, Z16, Z30
	VCVTPS2PD Y14, Z16
	VFMADD231PD Z16, Z16, Z30
	VCVTPS2PD Y15, Z16
	VFMADD231PD Z16, Z16, Z30
	ADDQ $32, R10
	DECQ R12
	JNZ  sloop

sdone:
	VMOVUPD Z30, (R13)
	VZEROUPPER
	RET

// func scaleRowAVX512(out, x, w *float32, n16 int, scale float64)
//
// out[c] = float32(float64(x[c])·scale)·w[c] for c < 16·n16: the product
// rounded in float64, then to float32, then times w rounded in float32,
// as the Go loop computes it.
TEXT ·scaleRowAVX512(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DX
	MOVQ n16+24(FP), CX
	VBROADCASTSD scale+32(FP), Z31
	TESTQ CX, CX
	JZ    cdone

cloop:
	VCVTPS2PD (SI), Z0
	VCVTPS2PD 32(SI), Z1
	VMULPD    Z31, Z0, Z0
	VMULPD    Z31, Z1, Z1
	VCVTPD2PS Z0, Y0
	VCVTPD2PS Z1, Y1
	VINSERTF64X4 $1, Y1, Z0, Z0
	VMULPS    (DX), Z0, Z0
	VMOVUPS   Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ CX
	JNZ  cloop

cdone:
	VZEROUPPER
	RET
