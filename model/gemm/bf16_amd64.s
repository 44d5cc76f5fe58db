#include "textflag.h"

// One-row dot kernel with bfloat16 weights (batch-1 decode of a bf16
// model): four rows of B, stored as bf16 and ldb bytes apart, against one
// float32 row a; out[r] = Σ widen(b_r)·a. A bf16 value widens to float32
// exactly by a 16-bit left shift, so each 16-element step loads 32 bytes of
// each row, zero-extends the words to dwords (VPMOVZXWD) and shifts them
// up before the FMA: half the bytes of the float32 kernel for the same
// float32 arithmetic. Two steps per iteration, two accumulators per row.

#define HSUM256B(y, x, dst) \
	VEXTRACTF128 $1, y, X15 \
	VADDPS       X15, x, x \
	VMOVHLPS     x, X15, X15 \
	VADDPS       X15, x, x \
	VMOVSHDUP    x, X15 \
	VADDSS       X15, x, x \
	VMOVSS       x, dst

#define HSUM512B(z, y, x, dst) \
	VEXTRACTF64X4 $1, z, Y14 \
	VADDPS        Y14, y, y \
	HSUM256B(y, x, dst)

#define STEP(off, areg, acc, row) \
	VPMOVZXWD off(row), Z10 \
	VPSLLD    $16, Z10, Z10 \
	VFMADD231PS Z10, areg, acc

// func dot4x1BF16AVX512(k int, a *float32, b *uint16, ldb uintptr, out *[4]float32)
// k is a multiple of 16.
TEXT ·dot4x1BF16AVX512(SB), NOSPLIT, $0-40
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), R8
	MOVQ b+16(FP), SI
	MOVQ ldb+24(FP), DX
	MOVQ out+32(FP), DI
	LEAQ (DX)(DX*2), R10
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	XORQ AX, AX // byte offset into a
	XORQ R9, R9 // byte offset into the rows of b
	SHRQ $4, CX
	MOVQ CX, R11
	SHRQ $1, CX
	JZ   tailb

loopb:
	VMOVUPS (R8)(AX*1), Z8
	VMOVUPS 64(R8)(AX*1), Z9
	LEAQ    (SI)(R9*1), BX
	LEAQ    (BX)(DX*1), R12
	LEAQ    (BX)(DX*2), R13
	LEAQ    (BX)(R10*1), R14
	PREFETCHT0 256(BX)
	PREFETCHT0 256(R12)
	PREFETCHT0 256(R13)
	PREFETCHT0 256(R14)
	STEP(0, Z8, Z0, BX)
	STEP(0, Z8, Z1, R12)
	STEP(0, Z8, Z2, R13)
	STEP(0, Z8, Z3, R14)
	STEP(32, Z9, Z4, BX)
	STEP(32, Z9, Z5, R12)
	STEP(32, Z9, Z6, R13)
	STEP(32, Z9, Z7, R14)
	ADDQ $128, AX
	ADDQ $64, R9
	DECQ CX
	JNZ  loopb

tailb:
	ANDQ $1, R11
	JZ   doneb
	VMOVUPS (R8)(AX*1), Z8
	LEAQ    (SI)(R9*1), BX
	LEAQ    (BX)(DX*1), R12
	LEAQ    (BX)(DX*2), R13
	LEAQ    (BX)(R10*1), R14
	STEP(0, Z8, Z0, BX)
	STEP(0, Z8, Z1, R12)
	STEP(0, Z8, Z2, R13)
	STEP(0, Z8, Z3, R14)

doneb:
	VADDPS Z4, Z0, Z0
	VADDPS Z5, Z1, Z1
	VADDPS Z6, Z2, Z2
	VADDPS Z7, Z3, Z3
	HSUM512B(Z0, Y0, X0, 0(DI))
	HSUM512B(Z1, Y1, X1, 4(DI))
	HSUM512B(Z2, Y2, X2, 8(DI))
	HSUM512B(Z3, Y3, X3, 12(DI))
	VZEROUPPER
	RET
