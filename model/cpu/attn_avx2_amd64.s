#include "textflag.h"

// The cached attention's grouped kernels for the avx2 tier (AVX2 and FMA):
// attn_amd64.s's AVX-512 kernels in 256-bit registers, with the same
// arithmetic per lane as attention.go's loops, so the same bits.

// func dotsGroupAVX2(qp, k *float32, ldk uintptr, n, chunks int, out, pv *float32)
//
// out[8i + h] = dot(q_h, k + i·ldk bytes) for i < n and eight heads h, as
// attention.go's dot: partial sum j of a head takes the elements ≡ j mod 4
// in order, then (s0 + s1) + (s2 + s3). Here a vector holds one partial
// sum of all eight heads: qp (packQAVX2) holds, for chunk c and j < 4, the
// eight heads' values 4c + j, and each key value is broadcast against
// them. Two keys at a time (Y0-Y3 and Y4-Y7: key r's sums j), then one.
// pv: the value rows at the same pitch, asked for into L2 as their keys
// are read.
TEXT ·dotsGroupAVX2(SB), NOSPLIT, $0-56
	MOVQ k+8(FP), DI
	MOVQ ldk+16(FP), R8
	MOVQ n+24(FP), CX
	MOVQ out+40(FP), DX
	MOVQ pv+48(FP), BX

dtwo:
	CMPQ CX, $2
	JLT  done1
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
	VBROADCASTSS 0(DI)(AX*1), Y8
	VBROADCASTSS 0(R11)(AX*1), Y9
	VMULPS       0(SI), Y8, Y10
	VADDPS       Y10, Y0, Y0
	VMULPS       0(SI), Y9, Y11
	VADDPS       Y11, Y4, Y4
	VBROADCASTSS 4(DI)(AX*1), Y8
	VBROADCASTSS 4(R11)(AX*1), Y9
	VMULPS       32(SI), Y8, Y10
	VADDPS       Y10, Y1, Y1
	VMULPS       32(SI), Y9, Y11
	VADDPS       Y11, Y5, Y5
	VBROADCASTSS 8(DI)(AX*1), Y8
	VBROADCASTSS 8(R11)(AX*1), Y9
	VMULPS       64(SI), Y8, Y10
	VADDPS       Y10, Y2, Y2
	VMULPS       64(SI), Y9, Y11
	VADDPS       Y11, Y6, Y6
	VBROADCASTSS 12(DI)(AX*1), Y8
	VBROADCASTSS 12(R11)(AX*1), Y9
	VMULPS       96(SI), Y8, Y10
	VADDPS       Y10, Y3, Y3
	VMULPS       96(SI), Y9, Y11
	VADDPS       Y11, Y7, Y7
	ADDQ $16, AX
	ADDQ $128, SI
	DECQ R9
	JNZ  dtwoloop

	// (s0 + s1) + (s2 + s3), lane by lane.
	VADDPS  Y1, Y0, Y0
	VADDPS  Y3, Y2, Y2
	VADDPS  Y2, Y0, Y0
	VMOVUPS Y0, (DX)
	VADDPS  Y5, Y4, Y4
	VADDPS  Y7, Y6, Y6
	VADDPS  Y6, Y4, Y4
	VMOVUPS Y4, 32(DX)
	LEAQ (DI)(R8*2), DI
	ADDQ $64, DX
	SUBQ $2, CX
	JMP  dtwo

done1:
	TESTQ CX, CX
	JZ    ddone
	PREFETCHT1 (BX)
	MOVQ qp+0(FP), SI
	MOVQ chunks+32(FP), R9
	XORQ AX, AX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

doneloop:
	VBROADCASTSS 0(DI)(AX*1), Y8
	VMULPS       0(SI), Y8, Y10
	VADDPS       Y10, Y0, Y0
	VBROADCASTSS 4(DI)(AX*1), Y8
	VMULPS       32(SI), Y8, Y10
	VADDPS       Y10, Y1, Y1
	VBROADCASTSS 8(DI)(AX*1), Y8
	VMULPS       64(SI), Y8, Y10
	VADDPS       Y10, Y2, Y2
	VBROADCASTSS 12(DI)(AX*1), Y8
	VMULPS       96(SI), Y8, Y10
	VADDPS       Y10, Y3, Y3
	ADDQ $16, AX
	ADDQ $128, SI
	DECQ R9
	JNZ  doneloop
	VADDPS  Y1, Y0, Y0
	VADDPS  Y3, Y2, Y2
	VADDPS  Y2, Y0, Y0
	VMOVUPS Y0, (DX)

ddone:
	VZEROUPPER
	RET

// func axpyGroupF64AVX2(acc *float64, v *float32, ldv uintptr, e *float64, n, hs, nh int)
//
// acc[h·hs + c] += e[8i + h]·float64(v[i·ldv bytes + c]) for i < n in
// order, heads h < 8 (< 4 when nh ≤ 4) and c < hs (a multiple of 8): four
// heads by eight columns at a time (Y0-Y7: head h's columns in Y(2h),
// Y(2h+1)). The product of two float32 values is exact in float64, so the
// fused multiply-add rounds once where the Go loop rounds the product
// (exactly) and then the sum: the same bits.
TEXT ·axpyGroupF64AVX2(SB), NOSPLIT, $0-56
	MOVQ acc+0(FP), DI
	MOVQ v+8(FP), BX
	MOVQ ldv+16(FP), R8
	MOVQ hs+40(FP), R10
	SHLQ $3, R10 // a head's row of acc in bytes
	LEAQ (R10)(R10*2), R14 // three rows
	XORQ R13, R13 // the head group: 0, then 32 (bytes into e's rows)

agroup:
	XORQ R11, R11 // the column slice's offset in acc (bytes); v's is half

acols:
	LEAQ (DI)(R11*1), R12
	VMOVUPD 0(R12), Y0
	VMOVUPD 32(R12), Y1
	VMOVUPD 0(R12)(R10*1), Y2
	VMOVUPD 32(R12)(R10*1), Y3
	VMOVUPD 0(R12)(R10*2), Y4
	VMOVUPD 32(R12)(R10*2), Y5
	VMOVUPD 0(R12)(R14*1), Y6
	VMOVUPD 32(R12)(R14*1), Y7
	MOVQ R11, AX
	SHRQ $1, AX
	LEAQ (BX)(AX*1), SI // v's column slice
	MOVQ e+24(FP), DX
	ADDQ R13, DX
	MOVQ n+32(FP), CX
	TESTQ CX, CX
	JZ    astore

aloop:
	VCVTPS2PD    0(SI), Y8
	VCVTPS2PD    16(SI), Y9
	VBROADCASTSD 0(DX), Y10
	VFMADD231PD  Y8, Y10, Y0
	VFMADD231PD  Y9, Y10, Y1
	VBROADCASTSD 8(DX), Y11
	VFMADD231PD  Y8, Y11, Y2
	VFMADD231PD  Y9, Y11, Y3
	VBROADCASTSD 16(DX), Y10
	VFMADD231PD  Y8, Y10, Y4
	VFMADD231PD  Y9, Y10, Y5
	VBROADCASTSD 24(DX), Y11
	VFMADD231PD  Y8, Y11, Y6
	VFMADD231PD  Y9, Y11, Y7
	ADDQ R8, SI
	ADDQ $64, DX
	DECQ CX
	JNZ  aloop

astore:
	VMOVUPD Y0, 0(R12)
	VMOVUPD Y1, 32(R12)
	VMOVUPD Y2, 0(R12)(R10*1)
	VMOVUPD Y3, 32(R12)(R10*1)
	VMOVUPD Y4, 0(R12)(R10*2)
	VMOVUPD Y5, 32(R12)(R10*2)
	VMOVUPD Y6, 0(R12)(R14*1)
	VMOVUPD Y7, 32(R12)(R14*1)
	ADDQ $64, R11
	CMPQ R11, R10
	JLT  acols

	// Heads 4-7, when there are more than four.
	TESTQ R13, R13
	JNZ   adone
	CMPQ  nh+48(FP), $4
	JLE   adone
	MOVQ  $32, R13
	LEAQ  (DI)(R10*4), DI
	JMP   agroup

adone:
	VZEROUPPER
	RET

// func scoresGroupAVX2(sc *float32, p *float64, n int, scale float64, m *[8]float64) (nan bool)
//
// scoresGroupAVX512's loop in two 256-bit halves (heads 0-3 in Y2, 4-7 in
// Y3): p[8i + h] = float64(sc[8i + h])·scale, m[h] = max(m[h], p[8i + h])
// with the builtin max's result where no value is NaN (VMAXPD where the
// two differ; where they compare equal, ±0 among them, the AND of their
// bits, so +0 wins); a NaN is reported.
TEXT ·scoresGroupAVX2(SB), NOSPLIT, $0-41
	MOVQ sc+0(FP), SI
	MOVQ p+8(FP), DI
	MOVQ n+16(FP), CX
	VBROADCASTSD scale+24(FP), Y5
	MOVQ m+32(FP), DX
	VMOVUPD (DX), Y2
	VMOVUPD 32(DX), Y3
	VXORPD  Y4, Y4, Y4 // NaN lanes seen
	TESTQ CX, CX
	JZ    sdone

sloop:
	VCVTPS2PD (SI), Y0
	VCVTPS2PD 16(SI), Y1
	VMULPD    Y5, Y0, Y0
	VMULPD    Y5, Y1, Y1
	VMOVUPD   Y0, (DI)
	VMOVUPD   Y1, 32(DI)
	VCMPPD    $0x03, Y0, Y0, Y6 // UNORD_Q: NaN
	VORPD     Y6, Y4, Y4
	VCMPPD    $0x03, Y1, Y1, Y7
	VORPD     Y7, Y4, Y4
	VCMPPD    $0x00, Y0, Y2, Y6 // EQ_OQ: m = x (±0 too)
	VANDPD    Y0, Y2, Y8
	VMAXPD    Y0, Y2, Y2
	VBLENDVPD Y6, Y8, Y2, Y2
	VCMPPD    $0x00, Y1, Y3, Y7
	VANDPD    Y1, Y3, Y9
	VMAXPD    Y1, Y3, Y3
	VBLENDVPD Y7, Y9, Y3, Y3
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  sloop

sdone:
	VMOVUPD   Y2, (DX)
	VMOVUPD   Y3, 32(DX)
	VMOVMSKPD Y4, AX
	TESTL     AX, AX
	SETNE     nan+40(FP)
	VZEROUPPER
	RET

// func argsGroupAVX2(p *float64, arg *float32, n int, m *[8]float64)
//
// arg[8i + h] = float32(p[8i + h] − m[h]): a rounded difference, then
// rounded to float32 to nearest, as the Go conversion.
TEXT ·argsGroupAVX2(SB), NOSPLIT, $0-32
	MOVQ p+0(FP), SI
	MOVQ arg+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ m+24(FP), DX
	VMOVUPD (DX), Y2
	VMOVUPD 32(DX), Y3
	TESTQ CX, CX
	JZ    gdone

gloop:
	VMOVUPD    (SI), Y0
	VMOVUPD    32(SI), Y1
	VSUBPD     Y2, Y0, Y0
	VSUBPD     Y3, Y1, Y1
	VCVTPD2PSY Y0, X0
	VCVTPD2PSY Y1, X1
	VMOVUPS    X0, (DI)
	VMOVUPS    X1, 16(DI)
	ADDQ $64, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  gloop

gdone:
	VZEROUPPER
	RET

// func weightsGroupAVX2(ex *float32, p *float64, n int, sum *[8]float64)
//
// p[8i + h] = float64(ex[8i + h]) and sum[h] += p[8i + h], i in order.
TEXT ·weightsGroupAVX2(SB), NOSPLIT, $0-32
	MOVQ ex+0(FP), SI
	MOVQ p+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ sum+24(FP), DX
	VMOVUPD (DX), Y2
	VMOVUPD 32(DX), Y3
	TESTQ CX, CX
	JZ    wdone

wloop:
	VCVTPS2PD (SI), Y0
	VCVTPS2PD 16(SI), Y1
	VMOVUPD   Y0, (DI)
	VMOVUPD   Y1, 32(DI)
	VADDPD    Y0, Y2, Y2
	VADDPD    Y1, Y3, Y3
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  wloop

wdone:
	VMOVUPD Y2, (DX)
	VMOVUPD Y3, 32(DX)
	VZEROUPPER
	RET
