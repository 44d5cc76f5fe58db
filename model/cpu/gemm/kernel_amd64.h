// Macros of the AVX-512 12×32 micro-kernels (kernel_amd64.s,
// direct_amd64.s); register use is described in kernel_amd64.s.

#define ROW512(addr, bc, c0, c1) \
	VBROADCASTSS addr, bc; \
	VFMADD231PS  Z24, bc, c0; \
	VFMADD231PS  Z25, bc, c1

#define STEP512 \
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
	ROW512((R11), Z28, Z16, Z17); \
	ROW512((R11)(R8*1), Z29, Z18, Z19); \
	ROW512((R11)(R8*2), Z30, Z20, Z21); \
	ROW512((R11)(R9*1), Z31, Z22, Z23); \
	ADDQ DX, AX; \
	ADDQ DX, R10; \
	ADDQ DX, R11; \
	ADDQ $128, BX

// Start loading the C tile's lines now, so they are in cache by the store:
// C rows are far apart and come from L3 or memory otherwise.
#define PREFETCHC512 \
	PREFETCHT0 0(R13); \
	PREFETCHT0 64(R13); \
	PREFETCHT0 127(R13); \
	ADDQ       SI, R13

// C row = alpha·acc + beta·C  (Z30 = alpha, Z31 = beta)
#define STORE512(c0, c1) \
	VMULPS      Z30, c0, c0; \
	VMULPS      Z30, c1, c1; \
	VFMADD231PS 0(DI), Z31, c0; \
	VFMADD231PS 64(DI), Z31, c1; \
	VMOVUPS     c0, 0(DI); \
	VMOVUPS     c1, 64(DI); \
	ADDQ        SI, DI

// C row = alpha·acc, C not read.
#define STORE512Z(c0, c1) \
	VMULPS  Z30, c0, c0; \
	VMULPS  Z30, c1, c1; \
	VMOVUPS c0, 0(DI); \
	VMOVUPS c1, 64(DI); \
	ADDQ    SI, DI

// The arguments of a 12×32 kernel (micro12x32AVX512's signature) into the
// registers of kernel_amd64.s, with R9 = 3·sr and A rows 4 and 8.
#define ARGS12x32 \
	MOVQ kc+0(FP), CX; \
	MOVQ a+8(FP), AX; \
	MOVQ sp+16(FP), DX; \
	MOVQ sr+24(FP), R8; \
	MOVQ b+32(FP), BX; \
	MOVQ c+40(FP), DI; \
	MOVQ ldc+48(FP), SI; \
	LEAQ (R8)(R8*2), R9; \
	LEAQ (AX)(R8*4), R10; \
	LEAQ (R10)(R8*4), R11

// Start loading the 12 C rows of the tile (R13 walks them).
#define PREFETCHC512x12 \
	MOVQ DI, R13; \
	PREFETCHC512; \
	PREFETCHC512; \
	PREFETCHC512; \
	PREFETCHC512; \
	PREFETCHC512; \
	PREFETCHC512; \
	PREFETCHC512; \
	PREFETCHC512; \
	PREFETCHC512; \
	PREFETCHC512; \
	PREFETCHC512; \
	PREFETCHC512

// Zero the 24 accumulators Z0..Z23.
#define ZERO512x12 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23

// Store the 12 rows: alpha·acc + beta·C, or alpha·acc with C not read.
#define STORE512x12 \
	STORE512(Z0, Z1); \
	STORE512(Z2, Z3); \
	STORE512(Z4, Z5); \
	STORE512(Z6, Z7); \
	STORE512(Z8, Z9); \
	STORE512(Z10, Z11); \
	STORE512(Z12, Z13); \
	STORE512(Z14, Z15); \
	STORE512(Z16, Z17); \
	STORE512(Z18, Z19); \
	STORE512(Z20, Z21); \
	STORE512(Z22, Z23)

#define STORE512Zx12 \
	STORE512Z(Z0, Z1); \
	STORE512Z(Z2, Z3); \
	STORE512Z(Z4, Z5); \
	STORE512Z(Z6, Z7); \
	STORE512Z(Z8, Z9); \
	STORE512Z(Z10, Z11); \
	STORE512Z(Z12, Z13); \
	STORE512Z(Z14, Z15); \
	STORE512Z(Z16, Z17); \
	STORE512Z(Z18, Z19); \
	STORE512Z(Z20, Z21); \
	STORE512Z(Z22, Z23)
