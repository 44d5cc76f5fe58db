#include "textflag.h"

// Micro-kernels. Register use shared by both:
//   CX  k steps left          AX  A row 0 (advances sp bytes per k step)
//   DX  sp                    R8  sr (bytes between A rows), R9 = 3·sr
//   R10 A row 4, R11 A row 8  BX  packed B micro-panel (NR floats per k)
//   DI  C tile row            SI  ldc in bytes        R13 C row to prefetch

// ---------------------------------------------------------------------------
// AVX-512: 12 rows × 32 columns. Z0..Z23 accumulate (row r in Z(2r), Z(2r+1)),
// Z24/Z25 hold the 32 B values of one k step, Z26..Z31 rotate as broadcasts.

#include "kernel_amd64.h"

// func micro12x32AVX512(kc int, a *float32, sp, sr uintptr, b, c *float32, ldc uintptr, alpha, beta float32)
TEXT ·micro12x32AVX512(SB), NOSPLIT, $0-64
	ARGS12x32

	PREFETCHC512x12

	ZERO512x12

	// Four k steps per iteration, then the remainder one at a time.
	MOVQ CX, R12
	SHRQ $2, R12
	ANDQ $3, CX
	TESTQ R12, R12
	JZ   tail512

loop512:
	STEP512
	STEP512
	STEP512
	STEP512
	DECQ R12
	JNZ  loop512

tail512:
	TESTQ CX, CX
	JZ    store512

tailloop512:
	STEP512
	DECQ CX
	JNZ  tailloop512

store512:
	VBROADCASTSS alpha+56(FP), Z30
	MOVL         beta+60(FP), R12
	ANDL         $0x7fffffff, R12
	JZ           storezero512
	VBROADCASTSS beta+60(FP), Z31
	STORE512x12
	VZEROUPPER
	RET

storezero512:
	STORE512Zx12
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------
// AVX-512, 8 rows × 32 columns: the 12-row kernel cut to rows 0..7 (Z0..Z15),
// for products of a few dozen rows (attention blocks of 64 queries) where 12
// would leave a mostly empty last panel.

#define STEP512x8 \
	VMOVUPS 0(BX), Z24; \
	VMOVUPS 64(BX), Z25; \
	ROW512((AX), Z26, Z0, Z1); \
	ROW512((AX)(R8*1), Z27, Z2, Z3); \
	ROW512((AX)(R8*2), Z28, Z4, Z5); \
	ROW512((AX)(R9*1), Z29, Z6, Z7); \
	ROW512((R10), Z30, Z8, Z9); \
	ROW512((R10)(R8*1), Z31, Z10, Z11); \
	ROW512((R10)(R8*2), Z26, Z12, Z13); \
	ROW512((R10)(R9*1), Z27, Z14, Z15); \
	ADDQ DX, AX; \
	ADDQ DX, R10; \
	ADDQ $128, BX

// func micro8x32AVX512(kc int, a *float32, sp, sr uintptr, b, c *float32, ldc uintptr, alpha, beta float32)
TEXT ·micro8x32AVX512(SB), NOSPLIT, $0-64
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ sp+16(FP), DX
	MOVQ sr+24(FP), R8
	MOVQ b+32(FP), BX
	MOVQ c+40(FP), DI
	MOVQ ldc+48(FP), SI
	LEAQ (R8)(R8*2), R9
	LEAQ (AX)(R8*4), R10

	MOVQ DI, R13
	PREFETCHC512
	PREFETCHC512
	PREFETCHC512
	PREFETCHC512
	PREFETCHC512
	PREFETCHC512
	PREFETCHC512
	PREFETCHC512

	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

	MOVQ CX, R12
	SHRQ $2, R12
	ANDQ $3, CX
	TESTQ R12, R12
	JZ   tail8

loop8:
	STEP512x8
	STEP512x8
	STEP512x8
	STEP512x8
	DECQ R12
	JNZ  loop8

tail8:
	TESTQ CX, CX
	JZ    store8

tailloop8:
	STEP512x8
	DECQ CX
	JNZ  tailloop8

store8:
	VBROADCASTSS alpha+56(FP), Z30
	MOVL         beta+60(FP), R12
	ANDL         $0x7fffffff, R12
	JZ           storezero8
	VBROADCASTSS beta+60(FP), Z31
	STORE512(Z0, Z1)
	STORE512(Z2, Z3)
	STORE512(Z4, Z5)
	STORE512(Z6, Z7)
	STORE512(Z8, Z9)
	STORE512(Z10, Z11)
	STORE512(Z12, Z13)
	STORE512(Z14, Z15)
	VZEROUPPER
	RET

storezero8:
	STORE512Z(Z0, Z1)
	STORE512Z(Z2, Z3)
	STORE512Z(Z4, Z5)
	STORE512Z(Z6, Z7)
	STORE512Z(Z8, Z9)
	STORE512Z(Z10, Z11)
	STORE512Z(Z12, Z13)
	STORE512Z(Z14, Z15)
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------
// AVX2 + FMA: 6 rows × 16 columns. Y0..Y11 accumulate (row r in Y(2r),
// Y(2r+1)), Y12/Y13 hold the 16 B values of one k step, Y14/Y15 broadcasts.

#define ROW256(addr, bc, c0, c1) \
	VBROADCASTSS addr, bc; \
	VFMADD231PS  Y12, bc, c0; \
	VFMADD231PS  Y13, bc, c1

#define STEP256 \
	VMOVUPS 0(BX), Y12; \
	VMOVUPS 32(BX), Y13; \
	ROW256((AX), Y14, Y0, Y1); \
	ROW256((AX)(R8*1), Y15, Y2, Y3); \
	ROW256((AX)(R8*2), Y14, Y4, Y5); \
	ROW256((AX)(R9*1), Y15, Y6, Y7); \
	ROW256((R10), Y14, Y8, Y9); \
	ROW256((R10)(R8*1), Y15, Y10, Y11); \
	ADDQ DX, AX; \
	ADDQ DX, R10; \
	ADDQ $64, BX

#define PREFETCHC256 \
	PREFETCHT0 0(R13); \
	PREFETCHT0 63(R13); \
	ADDQ       SI, R13

// C row = alpha·acc + beta·C  (Y14 = alpha, Y15 = beta)
#define STORE256(c0, c1) \
	VMULPS      Y14, c0, c0; \
	VMULPS      Y14, c1, c1; \
	VFMADD231PS 0(DI), Y15, c0; \
	VFMADD231PS 32(DI), Y15, c1; \
	VMOVUPS     c0, 0(DI); \
	VMOVUPS     c1, 32(DI); \
	ADDQ        SI, DI

#define STORE256Z(c0, c1) \
	VMULPS  Y14, c0, c0; \
	VMULPS  Y14, c1, c1; \
	VMOVUPS c0, 0(DI); \
	VMOVUPS c1, 32(DI); \
	ADDQ    SI, DI

// func micro6x16AVX2(kc int, a *float32, sp, sr uintptr, b, c *float32, ldc uintptr, alpha, beta float32)
TEXT ·micro6x16AVX2(SB), NOSPLIT, $0-64
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ sp+16(FP), DX
	MOVQ sr+24(FP), R8
	MOVQ b+32(FP), BX
	MOVQ c+40(FP), DI
	MOVQ ldc+48(FP), SI
	LEAQ (R8)(R8*2), R9
	LEAQ (AX)(R8*4), R10

	MOVQ DI, R13
	PREFETCHC256
	PREFETCHC256
	PREFETCHC256
	PREFETCHC256
	PREFETCHC256
	PREFETCHC256

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

	MOVQ CX, R12
	SHRQ $2, R12
	ANDQ $3, CX
	TESTQ R12, R12
	JZ   tail256

loop256:
	STEP256
	STEP256
	STEP256
	STEP256
	DECQ R12
	JNZ  loop256

tail256:
	TESTQ CX, CX
	JZ    store256

tailloop256:
	STEP256
	DECQ CX
	JNZ  tailloop256

store256:
	VBROADCASTSS alpha+56(FP), Y14
	MOVL         beta+60(FP), R12
	ANDL         $0x7fffffff, R12
	JZ           storezero256
	VBROADCASTSS beta+60(FP), Y15
	STORE256(Y0, Y1)
	STORE256(Y2, Y3)
	STORE256(Y4, Y5)
	STORE256(Y6, Y7)
	STORE256(Y8, Y9)
	STORE256(Y10, Y11)
	VZEROUPPER
	RET

storezero256:
	STORE256Z(Y0, Y1)
	STORE256Z(Y2, Y3)
	STORE256Z(Y4, Y5)
	STORE256Z(Y6, Y7)
	STORE256Z(Y8, Y9)
	STORE256Z(Y10, Y11)
	VZEROUPPER
	RET
