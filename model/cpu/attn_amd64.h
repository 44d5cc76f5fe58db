// Shared by the cached attention's kernels (attn_amd64.s against a
// float32 KV cache, attn_bf16_amd64.s against a bf16 one).

// The lanes of the eight heads' sums: lane 0 of each 128-bit group of the
// first table (heads 0-3), then of the second (heads 4-7).
DATA attnPick<>+0(SB)/4, $0
DATA attnPick<>+4(SB)/4, $4
DATA attnPick<>+8(SB)/4, $8
DATA attnPick<>+12(SB)/4, $12
DATA attnPick<>+16(SB)/4, $16
DATA attnPick<>+20(SB)/4, $20
DATA attnPick<>+24(SB)/4, $24
DATA attnPick<>+28(SB)/4, $28
DATA attnPick<>+32(SB)/8, $0
DATA attnPick<>+40(SB)/8, $0
DATA attnPick<>+48(SB)/8, $0
DATA attnPick<>+56(SB)/8, $0
GLOBL attnPick<>(SB), RODATA|NOPTR, $64

// LANEFOLD leaves (s0 + s1) + (s2 + s3) in lane 0 of each 128-bit group
// [s0 s1 s2 s3] of z (Z12 scratch): the element loop's final sum.
#define LANEFOLD(z) \
	VPERMILPS $0xB1, z, Z12 \
	VADDPS    Z12, z, z \
	VPERMILPS $0x4E, z, Z12 \
	VADDPS    Z12, z, z

// SCORES4 folds four keys' sums (key r, heads 4h..4h+3 in Z(2r+h)) and
// stores their 32 scores, key by key, at DX (Z14: attnPick).
#define SCORES4 \
	LANEFOLD(Z0) \
	LANEFOLD(Z1) \
	LANEFOLD(Z2) \
	LANEFOLD(Z3) \
	LANEFOLD(Z4) \
	LANEFOLD(Z5) \
	LANEFOLD(Z6) \
	LANEFOLD(Z7) \
	VPERMT2PS Z1, Z14, Z0 \
	VMOVUPS   Y0, (DX) \
	VPERMT2PS Z3, Z14, Z2 \
	VMOVUPS   Y2, 32(DX) \
	VPERMT2PS Z5, Z14, Z4 \
	VMOVUPS   Y4, 64(DX) \
	VPERMT2PS Z7, Z14, Z6 \
	VMOVUPS   Y6, 96(DX)

// PREFROWS asks for the cache line at SI of four rows ldk (R8) apart
// into L2 (R10: 3·ldk).
#define PREFROWS \
	PREFETCHT1 (SI) \
	PREFETCHT1 (SI)(R8*1) \
	PREFETCHT1 (SI)(R8*2) \
	PREFETCHT1 (SI)(R10*1)

// ACC4LD and ACC4ST load and store two vectors of acc for each of four
// heads: at base, base + R10, + 2·R10, + R14 (3·R10).
#define ACC4LD(base, a0, a1, b0, b1, c0, c1, d0, d1) \
	VMOVUPS 0(base), a0 \
	VMOVUPS 64(base), a1 \
	VMOVUPS 0(base)(R10*1), b0 \
	VMOVUPS 64(base)(R10*1), b1 \
	VMOVUPS 0(base)(R10*2), c0 \
	VMOVUPS 64(base)(R10*2), c1 \
	VMOVUPS 0(base)(R14*1), d0 \
	VMOVUPS 64(base)(R14*1), d1

#define ACC4ST(base, a0, a1, b0, b1, c0, c1, d0, d1) \
	VMOVUPS a0, 0(base) \
	VMOVUPS a1, 64(base) \
	VMOVUPS b0, 0(base)(R10*1) \
	VMOVUPS b1, 64(base)(R10*1) \
	VMOVUPS c0, 0(base)(R10*2) \
	VMOVUPS c1, 64(base)(R10*2) \
	VMOVUPS d0, 0(base)(R14*1) \
	VMOVUPS d1, 64(base)(R14*1)

// FOURKEYS sets up four keys' pass of a dots kernel: it asks for the four
// value rows at BX (for the weighted sums after the softmax; BX moves on
// four rows) and the key rows sixteen ahead of DI (R14: 16·ldk) into L2,
// whole rows (chunks·16 bytes); DRAM's latency is several passes of the
// loop, which ran at half its in-cache speed from memory with only the
// hardware's prefetchers (BenchmarkAttentionDecodeStep05B). Then SI = qp,
// R9 = chunks, AX = 0 and R11-R13 the second to fourth key rows.
#define FOURKEYS(label) \
	MOVQ chunks+32(FP), R11 \
	SHLQ $4, R11 \
	LEAQ (DI)(R14*1), AX \
	XORQ R9, R9 \
label: \
	LEAQ (BX)(R9*1), SI \
	PREFROWS \
	LEAQ (AX)(R9*1), SI \
	PREFROWS \
	ADDQ $64, R9 \
	CMPQ R9, R11 \
	JLT  label \
	LEAQ (BX)(R8*4), BX \
	MOVQ qp+0(FP), SI \
	MOVQ chunks+32(FP), R9 \
	XORQ AX, AX \
	LEAQ (DI)(R8*1), R11 \
	LEAQ (DI)(R8*2), R12 \
	LEAQ (DI)(R10*1), R13
