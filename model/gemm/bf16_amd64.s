#include "textflag.h"

// One-row dot kernel with bfloat16 weights (batch-1 decode of a bf16
// model): four rows of B, stored as bf16 and ldb bytes apart, against one
// float32 row a; out[r] = Σ widen(b_r)·a. A bf16 value widens to float32
// exactly by a 16-bit left shift, so each 16-element step loads 32 bytes of
// each row, zero-extends the words to dwords (VPMOVZXWD) and shifts them
// up before the FMA: half the bytes of the float32 kernel for the same
// float32 arithmetic. Two accumulators per row, alternate 16-value steps,
// then added and summed across lanes as dot4x1AVX512 does: the same bits
// as the float32 product of the widened weights.

#define HSUM256B(y, x, dst) \
	VEXTRACTF128 $1, y, X15 \
	VADDPS       X15, x, x \
	VHADDPS      x, x, x \
	VHADDPS      x, x, x \
	VMOVSS       x, dst

#define HSUM512B(z, y, x, dst) \
	VEXTRACTF64X4 $1, z, Y14 \
	VADDPS        Y14, y, y \
	HSUM256B(y, x, dst)

// ROWSEQ sums one row (base register row) into acc0 (the first halves of
// its 32-value steps) and acc1 (the second halves), the steps in order,
// prefetching 512 bytes ahead; R8 is a, R11 the number of 16-value steps.
#define ROWSEQ(row, acc0, acc1, lbl, tl, dn) \
	XORQ AX, AX \
	XORQ R9, R9 \
	MOVQ R11, CX \
	SHRQ $1, CX \
	JZ   tl \
lbl: \
	VMOVUPS (R8)(AX*1), Z8 \
	VMOVUPS 64(R8)(AX*1), Z9 \
	PREFETCHT0 512(row)(R9*1) \
	VPMOVZXWD (row)(R9*1), Z10 \
	VPSLLD    $16, Z10, Z10 \
	VFMADD231PS Z10, Z8, acc0 \
	VPMOVZXWD 32(row)(R9*1), Z11 \
	VPSLLD    $16, Z11, Z11 \
	VFMADD231PS Z11, Z9, acc1 \
	ADDQ $128, AX \
	ADDQ $64, R9 \
	DECQ CX \
	JNZ  lbl \
tl: \
	TESTQ $1, R11 \
	JZ    dn \
	VMOVUPS (R8)(AX*1), Z8 \
	VPMOVZXWD (row)(R9*1), Z10 \
	VPSLLD    $16, Z10, Z10 \
	VFMADD231PS Z10, Z8, acc0 \
dn:

// func dot4x1BF16AVX512(k int, a *float32, b *uint16, ldb uintptr, out *[4]float32)
//
// k is a multiple of 16. The rows are read one after another, not side by
// side: four rows of a decode's weights are one run of memory, which the
// hardware prefetcher follows, where four interleaved streams of a row's
// length (1-2 KiB) were too short for it to take up (a batch-1 decode of
// bf16 weights read 7 GB/s a core that way, 11 this way).
TEXT ·dot4x1BF16AVX512(SB), NOSPLIT, $0-40
	MOVQ k+0(FP), R11
	MOVQ a+8(FP), R8
	MOVQ b+16(FP), BX
	MOVQ ldb+24(FP), DX
	MOVQ out+32(FP), DI
	LEAQ (BX)(DX*1), R12
	LEAQ (BX)(DX*2), R13
	LEAQ (R12)(DX*2), R14
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	SHRQ $4, R11
	ROWSEQ(BX, Z0, Z4, seq0, seqt0, seqd0)
	ROWSEQ(R12, Z1, Z5, seq1, seqt1, seqd1)
	ROWSEQ(R13, Z2, Z6, seq2, seqt2, seqd2)
	ROWSEQ(R14, Z3, Z7, seq3, seqt3, seqd3)
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
