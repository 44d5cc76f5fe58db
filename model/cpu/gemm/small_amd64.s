#include "textflag.h"

#define PFROWS 3

// Dot products for products with few rows of op(A) and a transposed B (a
// matrix-vector product per row: decode steps, LM heads of one token).
// Each call reduces four rows of B (ldb bytes apart) against two rows of
// op(A) over k floats; out[2r+i] = Σ b_r·a_i. Eight accumulators, one per
// (r, i), cover the FMA latency.

// HSUM256 leaves the sum of the 8 lanes of Y in its low float and stores it.
#define HSUM256(y, x, dst) \
	VEXTRACTF128 $1, y, X15; \
	VADDPS       X15, x, x; \
	VHADDPS      x, x, x; \
	VHADDPS      x, x, x; \
	MOVSS        x, dst

// func dot4x2AVX2(k int, a0, a1, b *float32, ldb uintptr, out *[8]float32)
// k is a multiple of 8.
TEXT ·dot4x2AVX2(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), CX
	MOVQ a0+8(FP), R8
	MOVQ a1+16(FP), R9
	MOVQ b+24(FP), SI
	MOVQ ldb+32(FP), DX
	MOVQ out+40(FP), DI
	LEAQ (DX)(DX*2), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX
	SHRQ $3, CX
	JZ   done2

loop2:
	VMOVUPS (R8)(AX*1), Y8
	VMOVUPS (R9)(AX*1), Y9
	LEAQ    (SI)(AX*1), BX
	VMOVUPS (BX), Y10
	VMOVUPS (BX)(DX*1), Y11
	VMOVUPS (BX)(DX*2), Y12
	VMOVUPS (BX)(R10*1), Y13
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y10, Y1
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y9, Y11, Y3
	VFMADD231PS Y8, Y12, Y4
	VFMADD231PS Y9, Y12, Y5
	VFMADD231PS Y8, Y13, Y6
	VFMADD231PS Y9, Y13, Y7
	ADDQ $32, AX
	DECQ CX
	JNZ  loop2

done2:
	HSUM256(Y0, X0, 0(DI))
	HSUM256(Y1, X1, 4(DI))
	HSUM256(Y2, X2, 8(DI))
	HSUM256(Y3, X3, 12(DI))
	HSUM256(Y4, X4, 16(DI))
	HSUM256(Y5, X5, 20(DI))
	HSUM256(Y6, X6, 24(DI))
	HSUM256(Y7, X7, 28(DI))
	VZEROUPPER
	RET

// HSUM512 folds a zmm to its ymm half and then as HSUM256.
#define HSUM512(z, y, x, dst) \
	VEXTRACTF64X4 $1, z, Y15; \
	VADDPS        Y15, y, y; \
	HSUM256(y, x, dst)

// func dot4x2AVX512(k int, a0, a1, b *float32, ldb uintptr, out *[8]float32)
// k is a multiple of 16.
TEXT ·dot4x2AVX512(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), CX
	MOVQ a0+8(FP), R8
	MOVQ a1+16(FP), R9
	MOVQ b+24(FP), SI
	MOVQ ldb+32(FP), DX
	MOVQ out+40(FP), DI
	LEAQ (DX)(DX*2), R10
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	XORQ AX, AX
	SHRQ $4, CX
	JZ   done5

loop5:
	VMOVUPS (R8)(AX*1), Z8
	VMOVUPS (R9)(AX*1), Z9
	LEAQ    (SI)(AX*1), BX
	VMOVUPS (BX), Z10
	VMOVUPS (BX)(DX*1), Z11
	VMOVUPS (BX)(DX*2), Z12
	VMOVUPS (BX)(R10*1), Z13
	VFMADD231PS Z8, Z10, Z0
	VFMADD231PS Z9, Z10, Z1
	VFMADD231PS Z8, Z11, Z2
	VFMADD231PS Z9, Z11, Z3
	VFMADD231PS Z8, Z12, Z4
	VFMADD231PS Z9, Z12, Z5
	VFMADD231PS Z8, Z13, Z6
	VFMADD231PS Z9, Z13, Z7
	ADDQ $64, AX
	DECQ CX
	JNZ  loop5

done5:
	HSUM512(Z0, Y0, X0, 0(DI))
	HSUM512(Z1, Y1, X1, 4(DI))
	HSUM512(Z2, Y2, X2, 8(DI))
	HSUM512(Z3, Y3, X3, 12(DI))
	HSUM512(Z4, Y4, X4, 16(DI))
	HSUM512(Z5, Y5, X5, 20(DI))
	HSUM512(Z6, Y6, X6, 24(DI))
	HSUM512(Z7, Y7, X7, 28(DI))
	VZEROUPPER
	RET

// One-row kernels for a single row of op(A) (batch-1 decode): four rows of B
// against one row a, out[r] = Σ b_r·a. The loop takes two steps at a time
// with two accumulators per row (eight chains cover the FMA latency, and
// neither the duplicate row nor its FMAs of dot4x2 are paid); an odd last
// step goes to the first accumulators.

// func dot4x1AVX2(k int, a, b *float32, ldb uintptr, out *[4]float32)
// k is a multiple of 8.
TEXT ·dot4x1AVX2(SB), NOSPLIT, $0-40
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), R8
	MOVQ b+16(FP), SI
	MOVQ ldb+24(FP), DX
	MOVQ out+32(FP), DI
	LEAQ (DX)(DX*2), R10
	MOVQ DX, R12
	SHLQ $PFROWS, R12
	ADDQ SI, R12
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX
	SHRQ $3, CX
	MOVQ CX, R11
	SHRQ $1, CX
	JZ   tail1

loop1:
	VMOVUPS (R8)(AX*1), Y8
	VMOVUPS 32(R8)(AX*1), Y9
	LEAQ    (SI)(AX*1), BX
	LEAQ    (R12)(AX*1), R13
	PREFETCHT0 (R13)
	PREFETCHT0 (R13)(DX*1)
	PREFETCHT0 (R13)(DX*2)
	PREFETCHT0 (R13)(R10*1)
	VFMADD231PS (BX), Y8, Y0
	VFMADD231PS (BX)(DX*1), Y8, Y1
	VFMADD231PS (BX)(DX*2), Y8, Y2
	VFMADD231PS (BX)(R10*1), Y8, Y3
	VFMADD231PS 32(BX), Y9, Y4
	VFMADD231PS 32(BX)(DX*1), Y9, Y5
	VFMADD231PS 32(BX)(DX*2), Y9, Y6
	VFMADD231PS 32(BX)(R10*1), Y9, Y7
	ADDQ $64, AX
	DECQ CX
	JNZ  loop1

tail1:
	ANDQ $1, R11
	JZ   done1
	VMOVUPS (R8)(AX*1), Y8
	LEAQ    (SI)(AX*1), BX
	VFMADD231PS (BX), Y8, Y0
	VFMADD231PS (BX)(DX*1), Y8, Y1
	VFMADD231PS (BX)(DX*2), Y8, Y2
	VFMADD231PS (BX)(R10*1), Y8, Y3

done1:
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	HSUM256(Y0, X0, 0(DI))
	HSUM256(Y1, X1, 4(DI))
	HSUM256(Y2, X2, 8(DI))
	HSUM256(Y3, X3, 12(DI))
	VZEROUPPER
	RET

// func dot4x1AVX512(k int, a, b *float32, ldb uintptr, out *[4]float32)
// k is a multiple of 16.
TEXT ·dot4x1AVX512(SB), NOSPLIT, $0-40
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), R8
	MOVQ b+16(FP), SI
	MOVQ ldb+24(FP), DX
	MOVQ out+32(FP), DI
	LEAQ (DX)(DX*2), R10
	MOVQ DX, R12
	SHLQ $PFROWS, R12
	ADDQ SI, R12
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	XORQ AX, AX
	SHRQ $4, CX
	MOVQ CX, R11
	SHRQ $1, CX
	JZ   tail6

loop6:
	VMOVUPS (R8)(AX*1), Z8
	VMOVUPS 64(R8)(AX*1), Z9
	LEAQ    (SI)(AX*1), BX
	LEAQ    (R12)(AX*1), R13
	PREFETCHT0 (R13)
	PREFETCHT0 (R13)(DX*1)
	PREFETCHT0 (R13)(DX*2)
	PREFETCHT0 (R13)(R10*1)
	VFMADD231PS (BX), Z8, Z0
	VFMADD231PS (BX)(DX*1), Z8, Z1
	VFMADD231PS (BX)(DX*2), Z8, Z2
	VFMADD231PS (BX)(R10*1), Z8, Z3
	VFMADD231PS 64(BX), Z9, Z4
	VFMADD231PS 64(BX)(DX*1), Z9, Z5
	VFMADD231PS 64(BX)(DX*2), Z9, Z6
	VFMADD231PS 64(BX)(R10*1), Z9, Z7
	ADDQ $128, AX
	DECQ CX
	JNZ  loop6

tail6:
	ANDQ $1, R11
	JZ   done6
	VMOVUPS (R8)(AX*1), Z8
	LEAQ    (SI)(AX*1), BX
	VFMADD231PS (BX), Z8, Z0
	VFMADD231PS (BX)(DX*1), Z8, Z1
	VFMADD231PS (BX)(DX*2), Z8, Z2
	VFMADD231PS (BX)(R10*1), Z8, Z3

done6:
	VADDPS Z4, Z0, Z0
	VADDPS Z5, Z1, Z1
	VADDPS Z6, Z2, Z2
	VADDPS Z7, Z3, Z3
	HSUM512(Z0, Y0, X0, 0(DI))
	HSUM512(Z1, Y1, X1, 4(DI))
	HSUM512(Z2, Y2, X2, 8(DI))
	HSUM512(Z3, Y3, X3, 12(DI))
	VZEROUPPER
	RET
