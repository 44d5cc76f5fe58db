#include "textflag.h"
#include "attn_amd64.h"
#include "exp32_amd64.h"
#include "attn_bf16_amd64.h"

// Kernels of the cached attention against a bf16 KV cache (attn_bf16.go):
// its loops in vector registers, with their exact arithmetic. Bf16 pairs
// widen as attn_bf16_amd64.h says.

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

// The output's columns from a block's even (lanes 0-15) and odd (16-31)
// sums: the first sixteen, then the last.
DATA outPickLo<>+0(SB)/4, $0
DATA outPickLo<>+4(SB)/4, $16
DATA outPickLo<>+8(SB)/4, $1
DATA outPickLo<>+12(SB)/4, $17
DATA outPickLo<>+16(SB)/4, $2
DATA outPickLo<>+20(SB)/4, $18
DATA outPickLo<>+24(SB)/4, $3
DATA outPickLo<>+28(SB)/4, $19
DATA outPickLo<>+32(SB)/4, $4
DATA outPickLo<>+36(SB)/4, $20
DATA outPickLo<>+40(SB)/4, $5
DATA outPickLo<>+44(SB)/4, $21
DATA outPickLo<>+48(SB)/4, $6
DATA outPickLo<>+52(SB)/4, $22
DATA outPickLo<>+56(SB)/4, $7
DATA outPickLo<>+60(SB)/4, $23
GLOBL outPickLo<>(SB), RODATA|NOPTR, $64

// SCALED sets z to the sixteen float32 lanes of s (y: its low half) times
// Z20 (eight float64 copies of a reciprocal) in float64, each rounded to
// float32 (Z22 scratch).
#define SCALED(s, y, z, zy) \
	VCVTPS2PD     y, z \
	VEXTRACTF64X4 $1, s, Y22 \
	VCVTPS2PD     Y22, Z22 \
	VMULPD        Z20, z, z \
	VMULPD        Z20, Z22, Z22 \
	VCVTPD2PS     z, zy \
	VCVTPD2PS     Z22, Y22 \
	VINSERTF64X4  $1, Y22, z, z

// OUTHEAD writes head h's block of 32 outputs (its even columns' sums in
// ev, odd in od) at lo and hi (the first and last sixteen): each sum
// times 1/sum[h] (at roff(R9)) in float64, rounded to float32, in column
// order (Z26, Z27: outPickLo and its upper half).
#define OUTHEAD(ev, evy, od, ody, roff, lo, hi) \
	VBROADCASTSD roff(R9), Z20 \
	SCALED(ev, evy, Z21, Y21) \
	SCALED(od, ody, Z23, Y23) \
	VMOVAPS      Z21, Z24 \
	VPERMT2PS    Z23, Z26, Z24 \
	VPERMT2PS    Z23, Z27, Z21 \
	VMOVUPS      Z24, lo \
	VMOVUPS      Z21, hi

// func axpyOutBF16AVX512(out *float32, v *uint16, ldv uintptr, e *float32, n, hs, nh int, r *[8]float64)
//
// out[h·hs + 32b + c] = float32(float64(sum_i e[8i + h]·v[i][32b + c]) ·
// r[h]) for the heads h < nh (the others are not written): the sums of
// each block b of 32 columns through fused multiply-adds in key order,
// eight heads (seven when nh is 7) at a time, the even columns' in Z(2h)
// and the odd ones' in Z(2h+1) (bf16 pairs widen that way without a
// shuffle), then scaled and put back in column order.
TEXT ·axpyOutBF16AVX512(SB), NOSPLIT, $0-64
	MOVQ out+0(FP), DI
	MOVQ v+8(FP), BX
	MOVQ ldv+16(FP), R8
	MOVQ hs+40(FP), R10
	SHLQ $2, R10 // a head's row of out in bytes
	LEAQ (R10)(R10*2), R14 // 3 rows
	MOVQ r+56(FP), R9
	VPBROADCASTD bf16HiHalf<>(SB), Z18
	VMOVDQU32    outPickLo<>(SB), Z26
	MOVL         $8, AX
	VPBROADCASTD AX, Z27
	VPADDD       Z27, Z26, Z27 // the second sixteen columns
	XORQ R11, R11 // the block's offset in out (bytes); v's is half

bcols:
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
	LEAQ (DI)(R11*1), R12
	LEAQ (R12)(R10*4), R13 // heads 4-7
	MOVQ nh+48(FP), CX
	OUTHEAD(Z0, Y0, Z1, Y1, 0, (R12), 64(R12))
	CMPQ CX, $1
	JLE  bnext
	OUTHEAD(Z2, Y2, Z3, Y3, 8, (R12)(R10*1), 64(R12)(R10*1))
	CMPQ CX, $2
	JLE  bnext
	OUTHEAD(Z4, Y4, Z5, Y5, 16, (R12)(R10*2), 64(R12)(R10*2))
	CMPQ CX, $3
	JLE  bnext
	OUTHEAD(Z6, Y6, Z7, Y7, 24, (R12)(R14*1), 64(R12)(R14*1))
	CMPQ CX, $4
	JLE  bnext
	OUTHEAD(Z8, Y8, Z9, Y9, 32, (R13), 64(R13))
	CMPQ CX, $5
	JLE  bnext
	OUTHEAD(Z10, Y10, Z11, Y11, 40, (R13)(R10*1), 64(R13)(R10*1))
	CMPQ CX, $6
	JLE  bnext
	OUTHEAD(Z12, Y12, Z13, Y13, 48, (R13)(R10*2), 64(R13)(R10*2))
	CMPQ CX, $7
	JLE  bnext
	OUTHEAD(Z14, Y14, Z15, Y15, 56, (R13)(R14*1), 64(R13)(R14*1))

bnext:
	ADDQ $128, R11
	CMPQ R11, R10
	JLT  bcols
	VZEROUPPER
	RET

// Each head's chunk of eight values, evens first.
DATA qSplit<>+0(SB)/4, $0
DATA qSplit<>+4(SB)/4, $2
DATA qSplit<>+8(SB)/4, $4
DATA qSplit<>+12(SB)/4, $6
DATA qSplit<>+16(SB)/4, $1
DATA qSplit<>+20(SB)/4, $3
DATA qSplit<>+24(SB)/4, $5
DATA qSplit<>+28(SB)/4, $7
GLOBL qSplit<>(SB), RODATA|NOPTR, $32

// func packQBF16AVX512(qp, q *float32, nh, hs int)
//
// The queries as dotsGroupBF16AVX512 reads them: for each chunk c of
// eight values (hs/8 of them), four vectors of sixteen lanes at qp +
// 256c: the even values 8c + 2j of heads 0-3, of heads 4-7, then the
// odd ones 8c + 2j + 1, head h in lanes 4(h mod 4) + j. Head h's four
// evens of a chunk are therefore at qp + 256c + 16h and its odds 128
// bytes on; heads nh-7 get zeros.
TEXT ·packQBF16AVX512(SB), NOSPLIT, $0-32
	MOVQ qp+0(FP), DI
	MOVQ q+8(FP), SI
	MOVQ nh+16(FP), DX
	MOVQ hs+24(FP), R8
	MOVQ R8, R9
	SHRQ $3, R9 // chunks
	SHLQ $2, R8 // a head's row of q in bytes
	VMOVDQU qSplit<>(SB), Y2
	VPXOR   X1, X1, X1
	XORQ    BX, BX // the head

phead:
	CMPQ BX, $8
	JGE  pdone
	MOVQ BX, AX
	SHLQ $4, AX
	ADDQ DI, AX // its place in chunk 0
	MOVQ R9, CX
	CMPQ BX, DX
	JGE  pzero
	MOVQ SI, R10

pchunk:
	VMOVUPS    (R10), Y0
	VPERMPS    Y0, Y2, Y0
	VMOVUPS    X0, (AX)
	VEXTRACTF128 $1, Y0, 128(AX)
	ADDQ $32, R10
	ADDQ $256, AX
	DECQ CX
	JNZ  pchunk
	ADDQ R8, SI
	INCQ BX
	JMP  phead

pzero:
	VMOVUPS X1, (AX)
	VMOVUPS X1, 128(AX)
	ADDQ $256, AX
	DECQ CX
	JNZ  pzero
	INCQ BX
	JMP  phead

pdone:
	VZEROUPPER
	RET

// func softmaxGroup32AVX512(sc, ex *float32, n int, scale float32, c *[12]float32, sum *[8]float64) (ok bool)
//
// softmaxGroup32Loops sixteen lanes at a time (a vector: keys i and i+1,
// eight heads each) for n ≥ 1 scores sc[8i + h], or false, with nothing
// written, when a score is a NaN or an infinity (the loops then give
// their NaNs). Pass 1: each head's largest score (order does not matter:
// the scores are finite, and ±0 give the same weights), times scale in
// float32. Pass 2: ex = exp32(float32(s·scale) − m) by EXP32 (x ≤ 0, so
// no lane is above expHi), sum[h] adding float64(ex) key by key.
TEXT ·softmaxGroup32AVX512(SB), NOSPLIT, $0-49
	MOVQ sc+0(FP), SI
	MOVQ ex+8(FP), DI
	MOVQ n+16(FP), CX
	VBROADCASTSS scale+24(FP), Z28
	MOVQ c+32(FP), BX
	MOVQ sum+40(FP), DX
	VBROADCASTSS f32NegInf<>(SB), Z8 // the largest scores
	VBROADCASTSS f32Abs<>(SB), Z9
	VBROADCASTSS f32PosInf<>(SB), Z10
	KXORW K3, K3, K3 // lanes with a NaN or an infinity
	MOVQ SI, R9
	MOVQ CX, R8
	SHRQ $1, R8 // pairs of keys
	JZ   mfold

mpair:
	VMOVUPS (R9), Z0
	VMAXPS  Z0, Z8, Z8
	VPANDD  Z9, Z0, Z1
	VCMPPS  $0x05, Z10, Z1, K1 // not below +Inf: an infinity or a NaN
	KORW    K1, K3, K3
	ADDQ    $64, R9
	DECQ    R8
	JNZ     mpair

mfold:
	VEXTRACTF64X4 $1, Z8, Y1
	VMAXPS        Y1, Y8, Y8 // even keys' and odd keys' largest
	TESTQ $1, CX
	JZ    mcheck
	VMOVUPS (R9), Y0 // the last key
	VMAXPS  Y0, Y8, Y8
	VPANDD  Y9, Y0, Y1
	VCMPPS  $0x05, Y10, Y1, K1
	KORW    K1, K3, K3

mcheck:
	KORTESTW K3, K3
	JNZ      mbad
	VMULPS        Y28, Y8, Y8 // m = float32(max·scale)
	VINSERTF64X4  $1, Y8, Z8, Z8
	EXP32CONSTS(BX)
	VPXORQ Z11, Z11, Z11 // sum, eight heads in float64
	MOVQ CX, R8
	SHRQ $1, R8
	JZ   etail

epair:
	VMOVUPS (SI), Z0
	VMULPS  Z28, Z0, Z0
	VSUBPS  Z8, Z0, Z0
	EXP32
	VMOVUPS       Z5, (DI)
	VCVTPS2PD     Y5, Z6
	VADDPD        Z6, Z11, Z11 // key i
	VEXTRACTF64X4 $1, Z5, Y7
	VCVTPS2PD     Y7, Z7
	VADDPD        Z7, Z11, Z11 // key i + 1
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ R8
	JNZ  epair

etail:
	TESTQ $1, CX
	JZ    edone
	VMOVUPS   (SI), Y0
	VMULPS    Z28, Z0, Z0
	VSUBPS    Z8, Z0, Z0
	EXP32
	VMOVUPS   Y5, (DI)
	VCVTPS2PD Y5, Z6
	VADDPD    Z6, Z11, Z11

edone:
	VMOVUPD Z11, (DX)
	MOVB    $1, ok+48(FP)
	VZEROUPPER
	RET

mbad:
	MOVB $0, ok+48(FP)
	VZEROUPPER
	RET
