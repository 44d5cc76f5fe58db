#include "textflag.h"

// One-row dot kernels with bfloat16 weights (batch-1 decode of a bf16
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

// ROWSEQ8 is ROWSEQ in 8-value (ymm) steps for the AVX2 kernel: the
// arithmetic of dot4x1AVX2 (two accumulators per row, alternate steps, an
// odd last step into the first), so the bits of its float32 product.
#define ROWSEQ8(row, acc0, acc1, lbl, tl, dn) \
	XORQ AX, AX \
	XORQ R9, R9 \
	MOVQ R11, CX \
	SHRQ $1, CX \
	JZ   tl \
lbl: \
	VMOVUPS (R8)(AX*1), Y8 \
	VMOVUPS 32(R8)(AX*1), Y9 \
	PREFETCHT0 512(row)(R9*1) \
	VPMOVZXWD (row)(R9*1), Y10 \
	VPSLLD    $16, Y10, Y10 \
	VFMADD231PS Y10, Y8, acc0 \
	VPMOVZXWD 16(row)(R9*1), Y11 \
	VPSLLD    $16, Y11, Y11 \
	VFMADD231PS Y11, Y9, acc1 \
	ADDQ $64, AX \
	ADDQ $32, R9 \
	DECQ CX \
	JNZ  lbl \
tl: \
	TESTQ $1, R11 \
	JZ    dn \
	VMOVUPS (R8)(AX*1), Y8 \
	VPMOVZXWD (row)(R9*1), Y10 \
	VPSLLD    $16, Y10, Y10 \
	VFMADD231PS Y10, Y8, acc0 \
dn:

// func dot4x1BF16AVX2(k int, a *float32, b *uint16, ldb uintptr, out *[4]float32)
//
// k is a multiple of 8; the rows are read one after another, as in
// dot4x1BF16AVX512.
TEXT ·dot4x1BF16AVX2(SB), NOSPLIT, $0-40
	MOVQ k+0(FP), R11
	MOVQ a+8(FP), R8
	MOVQ b+16(FP), BX
	MOVQ ldb+24(FP), DX
	MOVQ out+32(FP), DI
	LEAQ (BX)(DX*1), R12
	LEAQ (BX)(DX*2), R13
	LEAQ (R12)(DX*2), R14
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	SHRQ $3, R11
	ROWSEQ8(BX, Y0, Y4, seq80, seqt80, seqd80)
	ROWSEQ8(R12, Y1, Y5, seq81, seqt81, seqd81)
	ROWSEQ8(R13, Y2, Y6, seq82, seqt82, seqd82)
	ROWSEQ8(R14, Y3, Y7, seq83, seqt83, seqd83)
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	HSUM256B(Y0, X0, 0(DI))
	HSUM256B(Y1, X1, 4(DI))
	HSUM256B(Y2, X2, 8(DI))
	HSUM256B(Y3, X3, 12(DI))
	VZEROUPPER
	RET
