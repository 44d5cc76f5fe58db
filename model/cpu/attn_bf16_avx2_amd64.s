#include "textflag.h"
#include "exp32_amd64.h"
#include "attn_bf16_amd64.h"

// attendGroupBF16's kernels for the avx2 tier (AVX2 and FMA): the loops of
// attn_bf16.go in 256-bit registers, eight heads a vector, with their
// arithmetic per lane, so the same bits as the loops and as the AVX-512
// kernels (attn_bf16_amd64.s). Bf16 pairs widen as attn_bf16_amd64.h says.

// PAIR adds the pair j of a key's chunk (the dword at off(row)(AX*1)) to
// partial sum s of the eight heads: its even element against their values
// 8c + 2j (at qe(SI)), then its odd one against 8c + 2j + 1 (at qo(SI)),
// through fused multiply-adds (ev, od scratch; Y15: bf16HiHalf).
#define PAIR(row, off, qe, qo, s, ev, od) \
	VBROADCASTSS off(row)(AX*1), od \
	VPSLLD       $16, od, ev \
	VPAND        Y15, od, od \
	VFMADD231PS  qe(SI), ev, s \
	VFMADD231PS  qo(SI), od, s

// CHUNK adds one key's chunk of eight elements (at row + AX) to its four
// partial sums s0-s3.
#define CHUNK(row, s0, s1, s2, s3, ev, od) \
	PAIR(row, 0, 0, 32, s0, ev, od) \
	PAIR(row, 4, 64, 96, s1, ev, od) \
	PAIR(row, 8, 128, 160, s2, ev, od) \
	PAIR(row, 12, 192, 224, s3, ev, od)

// FOLD stores (s0 + s1) + (s2 + s3), lane by lane, at dst.
#define FOLD(s0, s1, s2, s3, dst) \
	VADDPS  s1, s0, s0 \
	VADDPS  s3, s2, s2 \
	VADDPS  s2, s0, s0 \
	VMOVUPS s0, dst

// func dotsGroupBF16AVX2(qp *float32, k *uint16, ldk uintptr, n, chunks int, out *float32, pv *uint16)
//
// out[8i + h] = the score of head h against the bf16 key at k + i·ldk
// bytes, for i < n, as attendGroupBF16Loop sums it: partial sum j of a
// head takes the elements c with c mod 8 ∈ {2j, 2j+1} in order, then
// (s0 + s1) + (s2 + s3). A vector holds one partial sum of all eight
// heads; qp (packQAVX2) holds the eight heads' p-th values at 32p bytes.
// Two keys at a time (Y0-Y3 and Y4-Y7), then one. pv: the value rows at
// the same pitch, asked for into L2 as their keys are read.
TEXT ·dotsGroupBF16AVX2(SB), NOSPLIT, $0-56
	MOVQ k+8(FP), DI
	MOVQ ldk+16(FP), R8
	MOVQ n+24(FP), CX
	MOVQ out+40(FP), DX
	MOVQ pv+48(FP), BX
	VBROADCASTSS bf16HiHalf<>(SB), Y15

dtwo:
	CMPQ CX, $2
	JLT  dlast
	PREFETCHT1 (BX)
	PREFETCHT1 (BX)(R8*1)
	LEAQ (BX)(R8*2), BX
	LEAQ (DI)(R8*1), R11 // the second key
	MOVQ qp+0(FP), SI
	MOVQ chunks+32(FP), R9
	XORQ AX, AX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

dtwoloop:
	CHUNK(DI, Y0, Y1, Y2, Y3, Y8, Y9)
	CHUNK(R11, Y4, Y5, Y6, Y7, Y10, Y11)
	ADDQ $16, AX
	ADDQ $256, SI
	DECQ R9
	JNZ  dtwoloop

	FOLD(Y0, Y1, Y2, Y3, (DX))
	FOLD(Y4, Y5, Y6, Y7, 32(DX))
	LEAQ (DI)(R8*2), DI
	ADDQ $64, DX
	SUBQ $2, CX
	JMP  dtwo

dlast:
	TESTQ CX, CX
	JZ    ret
	PREFETCHT1 (BX)
	MOVQ qp+0(FP), SI
	MOVQ chunks+32(FP), R9
	XORQ AX, AX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

dlastloop:
	CHUNK(DI, Y0, Y1, Y2, Y3, Y8, Y9)
	ADDQ $16, AX
	ADDQ $256, SI
	DECQ R9
	JNZ  dlastloop
	FOLD(Y0, Y1, Y2, Y3, (DX))

ret:
	VZEROUPPER
	RET

// HEAD adds one key's sixteen values (at SI, widened into Y8 and Y9) times
// e[8i + h0 + q] (at DX) to head h0 + q's sums, Y(2q) and Y(2q+1), for
// q < 4 (Y10 scratch).
#define HEAD(off, a, b) \
	VBROADCASTSS off(DX), Y10 \
	VFMADD231PS  Y10, Y8, a \
	VFMADD231PS  Y10, Y9, b

// SCALED8 writes acc (eight sums; accx its low half) times Y12 (four
// float64 copies of a reciprocal) in float64, each rounded to float32,
// at dst (Y13, Y14 scratch).
#define SCALED8(acc, accx, dst) \
	VCVTPS2PD    accx, Y13 \
	VEXTRACTF128 $1, acc, X14 \
	VCVTPS2PD    X14, Y14 \
	VMULPD       Y12, Y13, Y13 \
	VMULPD       Y12, Y14, Y14 \
	VCVTPD2PSY   Y13, X13 \
	VCVTPD2PSY   Y14, X14 \
	VINSERTF128  $1, X14, Y13, Y13 \
	VMOVUPS      Y13, dst

// OUT writes head h0 + q's sixteen outputs (sums a and b) at lo and hi
// (their place in out: the first eight, then the last), each times 1/sum
// (at roff(R9): r[h0 + q]), unless h0 + q ≥ nh (R13: nh − h0).
#define OUT(q, roff, a, ax, b, bx, lo, hi) \
	CMPQ         R13, $q \
	JLE          onext \
	VBROADCASTSD roff(R9), Y12 \
	SCALED8(a, ax, lo) \
	SCALED8(b, bx, hi)

// func axpyOutBF16AVX2(out *float32, v *uint16, ldv uintptr, e *float32, n, hs, nh int, r *[8]float64)
//
// out[h·hs + c] = float32(float64(sum_i e[8i + h]·v[i][c]) · r[h]) for the
// heads h < nh (the others are not written): each column's sum through
// fused multiply-adds in key order, as attendGroupBF16Loop adds it. Four
// heads a pass (h0 = 0, then 4 when nh > 4), blocks of sixteen columns
// (widened in column order, Y8 and Y9), head h0 + q's in Y(2q), Y(2q+1).
TEXT ·axpyOutBF16AVX2(SB), NOSPLIT, $0-64
	MOVQ ldv+16(FP), R8
	MOVQ hs+40(FP), R10
	SHLQ $2, R10 // a head's row of out in bytes
	LEAQ (R10)(R10*2), R14 // 3 rows
	XORQ BX, BX // h0

opass:
	MOVQ nh+48(FP), R13
	SUBQ BX, R13 // heads of this pass, if ≤ 4
	JLE  oret
	MOVQ r+56(FP), R9
	LEAQ (R9)(BX*8), R9 // r[h0]
	MOVQ BX, AX
	IMULQ R10, AX
	MOVQ out+0(FP), DI
	ADDQ AX, DI // head h0's row
	XORQ R11, R11 // the block's offset in out (bytes); v's is half

oblock:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ R11, AX
	SHRQ $1, AX
	MOVQ v+8(FP), SI
	ADDQ AX, SI // v's block
	MOVQ e+24(FP), DX
	LEAQ (DX)(BX*4), DX // e[8i + h0]
	MOVQ n+32(FP), CX
	TESTQ CX, CX
	JZ    ostore

okey:
	VPMOVZXWD (SI), Y8
	VPMOVZXWD 16(SI), Y9
	VPSLLD    $16, Y8, Y8
	VPSLLD    $16, Y9, Y9
	HEAD(0, Y0, Y1)
	HEAD(4, Y2, Y3)
	HEAD(8, Y4, Y5)
	HEAD(12, Y6, Y7)
	ADDQ R8, SI
	ADDQ $32, DX
	DECQ CX
	JNZ  okey

ostore:
	LEAQ (DI)(R11*1), R12
	OUT(0, 0, Y0, X0, Y1, X1, (R12), 32(R12))
	OUT(1, 8, Y2, X2, Y3, X3, (R12)(R10*1), 32(R12)(R10*1))
	OUT(2, 16, Y4, X4, Y5, X5, (R12)(R10*2), 32(R12)(R10*2))
	OUT(3, 24, Y6, X6, Y7, X7, (R12)(R14*1), 32(R12)(R14*1))

onext:
	ADDQ $64, R11
	CMPQ R11, R10
	JLT  oblock
	ADDQ $4, BX
	CMPQ BX, $8
	JLT  opass

oret:
	VZEROUPPER
	RET

// func softmaxGroup32AVX2(sc, ex *float32, n int, scale float32, c *[12]float32, sum *[8]float64) (ok bool)
//
// softmaxGroup32Loops a key (eight heads) a vector, for n ≥ 0 scores
// sc[8i + h], or false, with nothing written, when a score is a NaN or an
// infinity (the loops then give their NaNs). Pass 1: each head's largest
// score (order does not matter: the scores are finite, and ±0 give the
// same weights), times scale in float32. Pass 2: ex = exp32(float32(s·scale)
// − m) by EXP32Y (x ≤ 0, so no lane is above expHi), sum[h] adding
// float64(ex) key by key: heads 0-3 in Y5, 4-7 in Y14.
TEXT ·softmaxGroup32AVX2(SB), NOSPLIT, $0-49
	MOVQ sc+0(FP), SI
	MOVQ ex+8(FP), DI
	MOVQ n+16(FP), CX
	VBROADCASTSS scale+24(FP), Y6
	MOVQ c+32(FP), DX
	MOVQ sum+40(FP), BX
	VBROADCASTSS f32NegInf<>(SB), Y7 // the largest scores
	VBROADCASTSS f32Abs<>(SB), Y12
	VBROADCASTSS f32PosInf<>(SB), Y13
	VXORPS Y14, Y14, Y14 // lanes with a NaN or an infinity
	MOVQ SI, R9
	MOVQ CX, R8
	TESTQ R8, R8
	JZ    mcheck

mkey:
	VMOVUPS (R9), Y0
	VMAXPS  Y0, Y7, Y7
	VANDPS  Y12, Y0, Y1
	VCMPPS  $0x05, Y13, Y1, Y1 // not below +Inf: an infinity or a NaN
	VORPS   Y1, Y14, Y14
	ADDQ    $32, R9
	DECQ    R8
	JNZ     mkey

mcheck:
	VMOVMSKPS Y14, AX
	TESTL     AX, AX
	JNZ       mbad
	VMULPS    Y6, Y7, Y7 // m = float32(max·scale)
	EXP32YCONSTS(DX)
	VXORPD Y5, Y5, Y5
	VXORPD Y14, Y14, Y14
	TESTQ  CX, CX
	JZ     edone

ekey:
	VMOVUPS (SI), Y0
	VMULPS  Y6, Y0, Y0
	VSUBPS  Y7, Y0, Y0
	EXP32Y
	VMOVUPS      Y3, (DI)
	VCVTPS2PD    X3, Y1
	VADDPD       Y1, Y5, Y5
	VEXTRACTF128 $1, Y3, X2
	VCVTPS2PD    X2, Y2
	VADDPD       Y2, Y14, Y14
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  ekey

edone:
	VMOVUPD Y5, (BX)
	VMOVUPD Y14, 32(BX)
	MOVB    $1, ok+48(FP)
	VZEROUPPER
	RET

mbad:
	MOVB $0, ok+48(FP)
	VZEROUPPER
	RET
