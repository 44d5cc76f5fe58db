#include "textflag.h"
#include "attn_amd64.h"

// Kernels of the cached attention against a bf16 KV cache (attn_bf16.go):
// its loops in vector registers, with their exact arithmetic. A dword of
// bf16 pairs holds element 2j in its low half and 2j + 1 in its high
// half: shifted left by 16 it is the even element as float32, masked to
// its high half the odd one, so nothing is shuffled.

DATA bf16HiHalf<>+0(SB)/4, $0xffff0000
GLOBL bf16HiHalf<>(SB), RODATA|NOPTR, $4

// KEY adds one key's chunk (the 8 bf16 at row + AX) to heads 0-3 in a and
// 4-7 in b: the even elements against the queries in Z8 and Z9, then the
// odd ones against Z10 and Z11.
#define KEY(row, a, b) \
	VBROADCASTI32X4 (row)(AX*1), Z12 \
	VPANDD          Z15, Z12, Z13 \
	VPSLLD          $16, Z12, Z12 \
	VFMADD231PS     Z8, Z12, a \
	VFMADD231PS     Z10, Z13, a \
	VFMADD231PS     Z9, Z12, b \
	VFMADD231PS     Z11, Z13, b

// func dotsGroupBF16AVX512(qp *float32, k *uint16, ldk uintptr, n, chunks int, out *float32, pv *uint16)
//
// out[8i + h] = the score of head h against the bf16 key at k + i·ldk
// bytes, for i < n: chunks of eight elements; qp holds four vectors a
// chunk (attendGroupBF16). Four keys at a time (Z0..Z7: key r, heads
// 4h..4h+3 in Z(2r+h)), then one. pv: the value rows at the same pitch,
// asked for into L2 as their keys are read, as are the keys sixteen ahead.
TEXT ·dotsGroupBF16AVX512(SB), NOSPLIT, $0-56
	MOVQ k+8(FP), DI
	MOVQ ldk+16(FP), R8
	MOVQ n+24(FP), CX
	MOVQ out+40(FP), DX
	MOVQ pv+48(FP), BX
	LEAQ (R8)(R8*2), R10 // 3·ldk
	MOVQ R8, R14
	SHLQ $4, R14 // 16·ldk
	VMOVDQU32    attnPick<>(SB), Z14
	VPBROADCASTD bf16HiHalf<>(SB), Z15

bfour:
	CMPQ CX, $4
	JLT  bone
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	FOURKEYS(bpref)

bfourloop:
	VMOVUPS (SI), Z8
	VMOVUPS 64(SI), Z9
	VMOVUPS 128(SI), Z10
	VMOVUPS 192(SI), Z11
	KEY(DI, Z0, Z1)
	KEY(R11, Z2, Z3)
	KEY(R12, Z4, Z5)
	KEY(R13, Z6, Z7)
	ADDQ $16, AX
	ADDQ $256, SI
	DECQ R9
	JNZ  bfourloop

	SCORES4
	LEAQ (DI)(R8*4), DI
	ADDQ $128, DX
	SUBQ $4, CX
	JMP  bfour

bone:
	TESTQ CX, CX
	JZ    bdone
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	MOVQ qp+0(FP), SI
	MOVQ chunks+32(FP), R9
	XORQ AX, AX

boneloop:
	VMOVUPS (SI), Z8
	VMOVUPS 64(SI), Z9
	VMOVUPS 128(SI), Z10
	VMOVUPS 192(SI), Z11
	KEY(DI, Z0, Z1)
	ADDQ $16, AX
	ADDQ $256, SI
	DECQ R9
	JNZ  boneloop
	LANEFOLD(Z0)
	LANEFOLD(Z1)
	VPERMT2PS Z1, Z14, Z0
	VMOVUPS   Y0, (DX)
	ADDQ R8, DI
	ADDQ $32, DX
	DECQ CX
	JMP  bone

bdone:
	VZEROUPPER
	RET

// HEAD adds e[8i + h]·v to head h's even (a) and odd (b) columns.
#define HEAD(off, a, b) \
	VFMADD231PS.BCST off(DX), Z16, a \
	VFMADD231PS.BCST off(DX), Z17, b

// BF16KEY7 adds key i's value block (at SI, widened: even columns in
// Z16, odd in Z17) times e[8i + h] (at DX) to heads 0-6.
#define BF16KEY7 \
	VMOVDQU32 (SI), Z16 \
	VPANDD    Z18, Z16, Z17 \
	VPSLLD    $16, Z16, Z16 \
	HEAD(0, Z0, Z1) \
	HEAD(4, Z2, Z3) \
	HEAD(8, Z4, Z5) \
	HEAD(12, Z6, Z7) \
	HEAD(16, Z8, Z9) \
	HEAD(20, Z10, Z11) \
	HEAD(24, Z12, Z13)

// func axpyGroupBF16AVX512(acc *float32, v *uint16, ldv uintptr, e *float32, n, hs, nh int)
//
// acc[h·hs + 32b + m] and acc[h·hs + 32b + 16 + m] += e[8i + h]·v[i][32b
// + 2m] and ·v[i][32b + 2m + 1] for i < n in order, through fused
// multiply-adds, eight heads h (seven: the eighth's sums untouched), one
// block b of 32 columns at a time (Z0..Z15: head h's in Z(2h), Z(2h+1)).
TEXT ·axpyGroupBF16AVX512(SB), NOSPLIT, $0-56
	MOVQ acc+0(FP), DI
	MOVQ v+8(FP), BX
	MOVQ ldv+16(FP), R8
	MOVQ hs+40(FP), R10
	SHLQ $2, R10 // a head's row of acc in bytes
	LEAQ (R10)(R10*2), R14 // 3 rows
	VPBROADCASTD bf16HiHalf<>(SB), Z18
	XORQ R11, R11 // the block's offset in acc (bytes); v's is half

bcols:
	LEAQ (DI)(R11*1), R12
	LEAQ (R12)(R10*4), R13 // heads 4-7
	ACC4LD(R12, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	ACC4LD(R13, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	MOVQ R11, AX
	SHRQ $1, AX
	LEAQ (BX)(AX*1), SI // v's block
	MOVQ e+24(FP), DX
	MOVQ n+32(FP), CX
	TESTQ CX, CX
	JZ    bstore
	CMPQ nh+48(FP), $7
	JEQ  bloop7

bloop:
	BF16KEY7
	HEAD(28, Z14, Z15)
	ADDQ R8, SI
	ADDQ $32, DX
	DECQ CX
	JNZ  bloop
	JMP  bstore

bloop7:
	BF16KEY7
	ADDQ R8, SI
	ADDQ $32, DX
	DECQ CX
	JNZ  bloop7

bstore:
	ACC4ST(R12, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	ACC4ST(R13, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	ADDQ $128, R11
	CMPQ R11, R10
	JLT  bcols
	VZEROUPPER
	RET
