#include "textflag.h"
#include "kernel_amd64.h"

// The 12×32 AVX-512 kernel for an A read in place (the swapped few-rows
// path, swap.go: A is a weight matrix, 12 of its rows per tile, one float
// per row per k step). The tile's rows start new streams at every tile, too
// short for the hardware prefetcher to train on (a 896-deep slice is 28
// cache lines per row), so the rows came from memory at a few GB/s. This
// variant prefetches, while it computes one tile, the next tile's 12 rows
// (the next 12 rows of A, at the same depth): one PREFETCHT0 per row
// per 16 k steps, a cache line of each. Its arithmetic is micro12x32AVX512's,
// instruction for instruction, so the results are the same bits.
//
// Registers as micro12x32AVX512 (kernel_amd64.s), plus R13, R14, R15: rows
// 12, 16 and 20 from AX (the next tile's rows 0, 4, 8), advancing with AX.

#define NEXT4(base) \
	PREFETCHT0 (base); \
	PREFETCHT0 (base)(R8*1); \
	PREFETCHT0 (base)(R8*2); \
	PREFETCHT0 (base)(R9*1)

#define ADVANCE_NEXT \
	ADDQ DX, R13; \
	ADDQ DX, R14; \
	ADDQ DX, R15

#define STEP512N \
	STEP512; \
	ADVANCE_NEXT

// func micro12x32DirectAVX512(kc int, a *float32, sp, sr uintptr, b, c *float32, ldc uintptr, alpha, beta float32)
TEXT ·micro12x32DirectAVX512(SB), NOSPLIT, $0-64
	ARGS12x32

	PREFETCHC512x12
	LEAQ (R11)(R8*4), R13
	LEAQ (R13)(R8*4), R14
	LEAQ (R14)(R8*4), R15

	ZERO512x12

	// Sixteen k steps (one cache line of each row) per iteration with the
	// next tile's lines prefetched, then four at a time, then one.
	MOVQ CX, R12
	SHRQ $4, R12
	ANDQ $15, CX
	TESTQ R12, R12
	JZ   mid

loop16:
	NEXT4(R13)
	NEXT4(R14)
	NEXT4(R15)
	STEP512N
	STEP512N
	STEP512N
	STEP512N
	STEP512N
	STEP512N
	STEP512N
	STEP512N
	STEP512N
	STEP512N
	STEP512N
	STEP512N
	STEP512N
	STEP512N
	STEP512N
	STEP512N
	DECQ R12
	JNZ  loop16

mid:
	MOVQ CX, R12
	SHRQ $2, R12
	ANDQ $3, CX
	TESTQ R12, R12
	JZ   tail

loop4:
	STEP512
	STEP512
	STEP512
	STEP512
	DECQ R12
	JNZ  loop4

tail:
	TESTQ CX, CX
	JZ    store

tailloop:
	STEP512
	DECQ CX
	JNZ  tailloop

store:
	VBROADCASTSS alpha+56(FP), Z30
	MOVL         beta+60(FP), R12
	ANDL         $0x7fffffff, R12
	JZ           storezero
	VBROADCASTSS beta+60(FP), Z31
	STORE512x12
	VZEROUPPER
	RET

storezero:
	STORE512Zx12
	VZEROUPPER
	RET
