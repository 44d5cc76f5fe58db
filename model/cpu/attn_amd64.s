#include "textflag.h"
#include "attn_amd64.h"

// Kernels of the cached (decode) attention, attention.go's loops in vector
// registers with their exact arithmetic (the same operations in the same
// order per lane; the one fused multiply-add is exact, see below).

// The query heads that share a KV head (up to eight) go against each
// cached key and value at once, each key and value read once for all.

// func dotsGroupAVX512(qp, k *float32, ldk uintptr, n, chunks int, out, pv *float32)
//
// out[8i + h] = dot(q_h, k + i·ldk bytes) for i < n and eight heads h, as
// attention.go's dot: lane j of a head's four partial sums takes the
// elements ≡ j mod 4 in order, then (s0 + s1) + (s2 + s3). qp holds the
// heads' queries chunk by chunk (packGroupQueries): chunk c is two vectors,
// heads 0-3 then 4-7, four values each. A key's chunk is broadcast to the
// four 128-bit lanes of a vector, so each lane group is one head's four
// partial sums. Four keys at a time (Z0..Z7: key r, heads 4h..4h+3 in
// Z(2r+h)), then one. pv: the value rows at the same pitch, asked for
// into L2 as their keys are read.
TEXT ·dotsGroupAVX512(SB), NOSPLIT, $0-56
	MOVQ k+8(FP), DI
	MOVQ ldk+16(FP), R8
	MOVQ n+24(FP), CX
	MOVQ out+40(FP), DX
	MOVQ pv+48(FP), BX
	LEAQ (R8)(R8*2), R10 // 3·ldk
	MOVQ R8, R14
	SHLQ $4, R14 // 16·ldk
	VMOVDQU32 attnPick<>(SB), Z14

gfour:
	CMPQ CX, $4
	JLT  gone
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	FOURKEYS(gpref)

gfourloop:
	VMOVUPS (SI), Z8
	VMOVUPS 64(SI), Z9
	VBROADCASTF32X4 (DI)(AX*1), Z10
	VMULPS Z8, Z10, Z12
	VADDPS Z12, Z0, Z0
	VMULPS Z9, Z10, Z13
	VADDPS Z13, Z1, Z1
	VBROADCASTF32X4 (R11)(AX*1), Z11
	VMULPS Z8, Z11, Z12
	VADDPS Z12, Z2, Z2
	VMULPS Z9, Z11, Z13
	VADDPS Z13, Z3, Z3
	VBROADCASTF32X4 (R12)(AX*1), Z10
	VMULPS Z8, Z10, Z12
	VADDPS Z12, Z4, Z4
	VMULPS Z9, Z10, Z13
	VADDPS Z13, Z5, Z5
	VBROADCASTF32X4 (R13)(AX*1), Z11
	VMULPS Z8, Z11, Z12
	VADDPS Z12, Z6, Z6
	VMULPS Z9, Z11, Z13
	VADDPS Z13, Z7, Z7
	ADDQ $16, AX
	ADDQ $128, SI
	DECQ R9
	JNZ  gfourloop

	// Per lane group: (s0 + s1) + (s2 + s3) in its first lane.
	SCORES4
	LEAQ (DI)(R8*4), DI
	ADDQ $128, DX
	SUBQ $4, CX
	JMP  gfour

gone:
	TESTQ CX, CX
	JZ    gdone
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	MOVQ qp+0(FP), SI
	MOVQ chunks+32(FP), R9
	XORQ AX, AX

goneloop:
	VBROADCASTF32X4 (DI)(AX*1), Z10
	VMULPS (SI), Z10, Z12
	VADDPS Z12, Z0, Z0
	VMULPS 64(SI), Z10, Z13
	VADDPS Z13, Z1, Z1
	ADDQ $16, AX
	ADDQ $128, SI
	DECQ R9
	JNZ  goneloop
	LANEFOLD(Z0)
	LANEFOLD(Z1)
	VPERMT2PS Z1, Z14, Z0
	VMOVUPS   Y0, (DX)
	ADDQ R8, DI
	ADDQ $32, DX
	DECQ CX
	JMP  gone

gdone:
	VZEROUPPER
	RET

// F64KEY7 adds key i's value row (at SI, widened) times e[8i + h] (at DX)
// to heads 0-6's sixteen columns.
#define F64KEY7 \
	VCVTPS2PD 0(SI), Z16 \
	VCVTPS2PD 32(SI), Z17 \
	VFMADD231PD.BCST 0(DX), Z16, Z0 \
	VFMADD231PD.BCST 0(DX), Z17, Z1 \
	VFMADD231PD.BCST 8(DX), Z16, Z2 \
	VFMADD231PD.BCST 8(DX), Z17, Z3 \
	VFMADD231PD.BCST 16(DX), Z16, Z4 \
	VFMADD231PD.BCST 16(DX), Z17, Z5 \
	VFMADD231PD.BCST 24(DX), Z16, Z6 \
	VFMADD231PD.BCST 24(DX), Z17, Z7 \
	VFMADD231PD.BCST 32(DX), Z16, Z8 \
	VFMADD231PD.BCST 32(DX), Z17, Z9 \
	VFMADD231PD.BCST 40(DX), Z16, Z10 \
	VFMADD231PD.BCST 40(DX), Z17, Z11 \
	VFMADD231PD.BCST 48(DX), Z16, Z12 \
	VFMADD231PD.BCST 48(DX), Z17, Z13

// func axpyGroupF64AVX512(acc *float64, v *float32, ldv uintptr, e *float64, n, hs, nh int)
//
// acc[h·hs + c] += e[8i + h]·float64(v[i·ldv bytes + c]) for i < n in
// order, eight heads h and c < hs (a multiple of 16), sixteen columns at a
// time (Z0..Z15: head h's columns in Z(2h), Z(2h+1)). The product of two
// float32 values is exact in float64, so the fused multiply-add rounds
// once where the Go loop rounds the product (exactly) and then the sum:
// the same bits. nh = 7 leaves the eighth head's sums as they are.
TEXT ·axpyGroupF64AVX512(SB), NOSPLIT, $0-56
	MOVQ acc+0(FP), DI
	MOVQ v+8(FP), BX
	MOVQ ldv+16(FP), R8
	MOVQ hs+40(FP), R10
	SHLQ $3, R10 // a head's row of acc in bytes
	XORQ R11, R11 // the column slice's offset in acc (bytes); v's is half

acols:
	LEAQ (DI)(R11*1), R12
	LEAQ (R12)(R10*4), R13 // heads 4-7
	LEAQ (R10)(R10*2), R14 // 3 rows
	ACC4LD(R12, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	ACC4LD(R13, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	MOVQ R11, AX
	SHRQ $1, AX
	LEAQ (BX)(AX*1), SI // v's column slice
	MOVQ e+24(FP), DX
	MOVQ n+32(FP), CX
	TESTQ CX, CX
	JZ    astore
	CMPQ nh+48(FP), $7
	JEQ  aloop7

aloop:
	F64KEY7
	VFMADD231PD.BCST 56(DX), Z16, Z14
	VFMADD231PD.BCST 56(DX), Z17, Z15
	ADDQ R8, SI
	ADDQ $64, DX
	DECQ CX
	JNZ  aloop
	JMP  astore

	// Seven heads (Qwen2.5-0.5B's 14 over 2 KV heads): the eighth's
	// accumulators stay as loaded.
aloop7:
	F64KEY7
	ADDQ R8, SI
	ADDQ $64, DX
	DECQ CX
	JNZ  aloop7

astore:
	ACC4ST(R12, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	ACC4ST(R13, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	ADDQ $128, R11
	CMPQ R11, R10
	JLT  acols
	VZEROUPPER
	RET

// The softmax between the two kernels above, eight heads a vector (the
// scores and weights are laid out 8i + h): attendGroup32's three loops.

// func scoresGroupAVX512(sc *float32, p *float64, n int, scale float64, m *[8]float64) (nan bool)
//
// p[8i + h] = float64(sc[8i + h])·scale and m[h] = max(m[h], p[8i + h])
// over i, with the builtin max's result where no value is NaN: VMAXPD
// where the two differ, and where they compare equal (±0 among them) the
// AND of their bits (+0 wins, as the builtin's does). A NaN is reported
// (then m is not the builtin's; the caller takes its loop).
TEXT ·scoresGroupAVX512(SB), NOSPLIT, $0-41
	MOVQ sc+0(FP), SI
	MOVQ p+8(FP), DI
	MOVQ n+16(FP), CX
	VBROADCASTSD scale+24(FP), Z1
	MOVQ m+32(FP), DX
	VMOVUPD (DX), Z2
	KXORW K3, K3, K3
	TESTQ CX, CX
	JZ    sdone

sloop:
	VCVTPS2PD (SI), Z0
	VMULPD    Z1, Z0, Z0
	VMOVUPD   Z0, (DI)
	VCMPPD    $0x03, Z0, Z0, K1 // UNORD_Q: NaN
	KORW      K1, K3, K3
	VCMPPD    $0x00, Z0, Z2, K2 // EQ_OQ: m = x (±0 too)
	VPANDQ    Z0, Z2, Z3
	VMAXPD    Z0, Z2, Z2
	VMOVAPD   Z3, K2, Z2
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  sloop

sdone:
	VMOVUPD Z2, (DX)
	KORTESTW K3, K3
	SETNE    nan+40(FP)
	VZEROUPPER
	RET

// func argsGroupAVX512(p *float64, arg *float32, n int, m *[8]float64)
//
// arg[8i + h] = float32(p[8i + h] − m[h]): a rounded difference, then
// rounded to float32 to nearest, as the Go conversion.
TEXT ·argsGroupAVX512(SB), NOSPLIT, $0-32
	MOVQ p+0(FP), SI
	MOVQ arg+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ m+24(FP), DX
	VMOVUPD (DX), Z2
	TESTQ CX, CX
	JZ    adone

argloop:
	VMOVUPD   (SI), Z0
	VSUBPD    Z2, Z0, Z0
	VCVTPD2PS Z0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ $64, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  argloop

adone:
	VZEROUPPER
	RET

// func weightsGroupAVX512(ex *float32, p *float64, n int, sum *[8]float64)
//
// p[8i + h] = float64(ex[8i + h]) and sum[h] += p[8i + h], i in order.
TEXT ·weightsGroupAVX512(SB), NOSPLIT, $0-32
	MOVQ ex+0(FP), SI
	MOVQ p+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ sum+24(FP), DX
	VMOVUPD (DX), Z2
	TESTQ CX, CX
	JZ    wdone

wloop:
	VCVTPS2PD (SI), Z0
	VMOVUPD   Z0, (DI)
	VADDPD    Z0, Z2, Z2
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  wloop

wdone:
	VMOVUPD Z2, (DX)
	VZEROUPPER
	RET

