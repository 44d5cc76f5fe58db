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
