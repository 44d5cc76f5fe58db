#include "textflag.h"
#include "transpose8_amd64.h"

// math.Exp's amd64 assembly (its FMA path, taken where the CPU has AVX and
// FMA), eight lanes at a time: the same constants and the same sequence of
// rounded and fused operations, so every lane is math.Exp's bits. Lanes
// whose result math.Exp computes by another branch (x not finite, above
// its overflow bound, or a scale 2^n outside the normal range) are
// reported; the caller redoes them with math.Exp.

DATA exp64c<>+0(SB)/8, $1.4426950408889634073599246810018920    // LOG2E
DATA exp64c<>+8(SB)/8, $0.69314718055966295651160180568695068359375 // LN2U
DATA exp64c<>+16(SB)/8, $0.28235290563031577122588448175013436025525412068e-12 // LN2L
DATA exp64c<>+24(SB)/8, $0.0625
DATA exp64c<>+32(SB)/8, $2.4801587301587301587e-5
DATA exp64c<>+40(SB)/8, $1.9841269841269841270e-4
DATA exp64c<>+48(SB)/8, $1.3888888888888888889e-3
DATA exp64c<>+56(SB)/8, $8.3333333333333333333e-3
DATA exp64c<>+64(SB)/8, $4.1666666666666666667e-2
DATA exp64c<>+72(SB)/8, $1.6666666666666666667e-1
DATA exp64c<>+80(SB)/8, $0.5
DATA exp64c<>+88(SB)/8, $1.0
DATA exp64c<>+96(SB)/8, $2.0
DATA exp64c<>+104(SB)/8, $7.09782712893384e+02 // Overflow
DATA exp64c<>+112(SB)/8, $0x7FF0000000000000    // +Inf
DATA exp64c<>+120(SB)/8, $0x7FFFFFFFFFFFFFFF    // |x| mask
DATA exp64c<>+128(SB)/8, $-1023.0
DATA exp64c<>+136(SB)/8, $1024.0
GLOBL exp64c<>(SB), RODATA, $144

// func exp64AVX512FMA(dst, src *float64, n int) (special bool)
TEXT ·exp64AVX512FMA(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	LEAQ exp64c<>(SB), DX
	VBROADCASTSD 0(DX), Z16   // LOG2E
	VBROADCASTSD 8(DX), Z17   // LN2U
	VBROADCASTSD 16(DX), Z18  // LN2L
	VBROADCASTSD 24(DX), Z19  // 1/16
	VBROADCASTSD 32(DX), Z20  // 1/8!
	VBROADCASTSD 40(DX), Z21  // 1/7!
	VBROADCASTSD 48(DX), Z22  // 1/6!
	VBROADCASTSD 56(DX), Z23  // 1/5!
	VBROADCASTSD 64(DX), Z24  // 1/4!
	VBROADCASTSD 72(DX), Z25  // 1/3!
	VBROADCASTSD 80(DX), Z26  // 0.5
	VBROADCASTSD 88(DX), Z27  // 1
	VBROADCASTSD 96(DX), Z28  // 2
	VBROADCASTSD 104(DX), Z29 // Overflow
	VBROADCASTSD 112(DX), Z30 // +Inf
	VBROADCASTSD 120(DX), Z31 // |x| mask
	VBROADCASTSD 128(DX), Z14 // −1023
	VBROADCASTSD 136(DX), Z13 // 1024
	MOVL $1023, AX
	MOVQ AX, X15
	VPBROADCASTD X15, Y15
	KXORW K7, K7, K7
	SHRQ $3, CX
	JZ   done

loop:
	VMOVUPD (SI), Z0
	VMULPD  Z0, Z16, Z1         // LOG2E·x
	VCVTPD2DQ Z1, Y2            // n = round to nearest even (MXCSR), as CVTSD2SL
	VCVTDQ2PD Y2, Z1
	VFNMADD231PD Z17, Z1, Z0    // x − n·LN2U, fused
	VFNMADD231PD Z18, Z1, Z0    // − n·LN2L, fused
	VMULPD  Z19, Z0, Z0         // r = ·/16
	VMOVAPD Z20, Z1
	VFMADD213PD Z21, Z0, Z1     // p = p·r + c, fused, down to 1
	VFMADD213PD Z22, Z0, Z1
	VFMADD213PD Z23, Z0, Z1
	VFMADD213PD Z24, Z0, Z1
	VFMADD213PD Z25, Z0, Z1
	VFMADD213PD Z26, Z0, Z1
	VFMADD213PD Z27, Z0, Z1
	VMULPD  Z1, Z0, Z0          // y = r·p
	VADDPD  Z28, Z0, Z1         // y = y·(y + 2), three times
	VMULPD  Z1, Z0, Z0
	VADDPD  Z28, Z0, Z1
	VMULPD  Z1, Z0, Z0
	VADDPD  Z28, Z0, Z1
	VMULPD  Z1, Z0, Z0
	VADDPD  Z28, Z0, Z1         // y = y·(y + 2) + 1, fused
	VFMADD213PD Z27, Z1, Z0
	VCMPPD  $0x12, Z14, Z1, K2  // n ≤ −1023 (LE_OQ): n + bias ≤ 0
	VCMPPD  $0x1d, Z13, Z1, K3  // n ≥ 1024 (GE_OQ): n + bias ≥ 2047
	KORW    K3, K2, K2
	VPADDD  Y15, Y2, Y2         // n + bias
	VPMOVSXDQ Y2, Z3
	VPSLLQ  $52, Z3, Z3         // 2^n
	VMULPD  Z3, Z0, Z0
	VMOVUPD Z0, (DI)
	// Report: |x| not below +Inf (Inf, NaN), x > Overflow, the scale above.
	VMOVUPD (SI), Z4
	VPANDQ  Z31, Z4, Z5
	VCMPPD  $0x05, Z30, Z5, K1  // NLT_UQ
	KORW    K2, K1, K1
	VCMPPD  $0x1e, Z29, Z4, K2  // GT_OQ
	KORW    K2, K1, K1
	KORW    K1, K7, K7
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop

done:
	KORTESTW K7, K7
	SETNE    special+24(FP)
	VZEROUPPER
	RET

// sumExps8AVX512 is sumExps for eight rows at once, a lane a row. Eight
// columns of the eight rows are loaded and transposed (8 × 8 floats), so
// that each vector holds one column of every row; each column then goes
// through x = float64(v)·invT − m (a rounded product, then a rounded
// difference, as the Go loop computes it), math.Exp's FMA path (the
// sequence of exp64AVX512FMA) and sum += e. Every lane's sum therefore
// takes its row's terms in column order with the bits of the one-row loop.
// A lane whose x lies outside (−708, 709), where math.Exp would take
// another branch (or x is NaN), is reported: the caller redoes the rows.

DATA sumc<>+0(SB)/8, $-708.0
DATA sumc<>+8(SB)/8, $709.0
GLOBL sumc<>(SB), RODATA, $16

// SUMEXP(col) takes one column (col: eight floats, a row each) through x,
// the range check (K7 collects the lanes out of range), math.Exp and
// sum += e. From LOG2E·x on, its operations are exp64AVX512FMA's loop one
// for one (its comments name each step), with the polynomial's inner
// coefficients read from exp64c<> (R11) instead of registers. Z16-Z19 are
// its scratch.
#define SUMEXP(col) \
	VCVTPS2PD col, Z16; \
	VMULPD  Z28, Z16, Z16; \
	VSUBPD  Z29, Z16, Z16; \
	VCMPPD  $0x1a, Z26, Z16, K1; \
	VCMPPD  $0x15, Z27, Z16, K2; \
	KORW    K1, K7, K7; \
	KORW    K2, K7, K7; \
	VMULPD  Z16, Z20, Z17; \
	VCVTPD2DQ Z17, Y18; \
	VCVTDQ2PD Y18, Z17; \
	VFNMADD231PD Z21, Z17, Z16; \
	VFNMADD231PD Z22, Z17, Z16; \
	VMULPD  Z23, Z16, Z16; \
	VBROADCASTSD 32(R11), Z17; \
	VFMADD213PD.BCST 40(R11), Z16, Z17; \
	VFMADD213PD.BCST 48(R11), Z16, Z17; \
	VFMADD213PD.BCST 56(R11), Z16, Z17; \
	VFMADD213PD.BCST 64(R11), Z16, Z17; \
	VFMADD213PD.BCST 72(R11), Z16, Z17; \
	VFMADD213PD.BCST 80(R11), Z16, Z17; \
	VFMADD213PD Z24, Z16, Z17; \
	VMULPD  Z17, Z16, Z16; \
	VADDPD  Z25, Z16, Z17; \
	VMULPD  Z17, Z16, Z16; \
	VADDPD  Z25, Z16, Z17; \
	VMULPD  Z17, Z16, Z16; \
	VADDPD  Z25, Z16, Z17; \
	VMULPD  Z17, Z16, Z16; \
	VADDPD  Z25, Z16, Z17; \
	VFMADD213PD Z24, Z17, Z16; \
	VPADDD  Y31, Y18, Y18; \
	VPMOVSXDQ Y18, Z19; \
	VPSLLQ  $52, Z19, Z19; \
	VMULPD  Z19, Z16, Z16; \
	VADDPD  Z16, Z30, Z30

// func sumExps8AVX512(rows *[8]*float32, off, n int, invT, m, sums *[8]float64) (special bool)
TEXT ·sumExps8AVX512(SB), NOSPLIT, $0-49
	MOVQ rows+0(FP), R11
	MOVQ 0(R11), AX
	MOVQ 8(R11), BX
	MOVQ 16(R11), CX
	MOVQ 24(R11), DX
	MOVQ 32(R11), SI
	MOVQ 40(R11), DI
	MOVQ 48(R11), R8
	MOVQ 56(R11), R9
	MOVQ off+8(FP), R10
	SHLQ $2, R10                // byte offset of the first column
	MOVQ n+16(FP), R12
	SHRQ $3, R12
	MOVQ invT+24(FP), R13
	VMOVUPD (R13), Z28          // invT, a lane a row
	MOVQ m+32(FP), R13
	VMOVUPD (R13), Z29          // m
	MOVQ sums+40(FP), R13
	VMOVUPD (R13), Z30          // the running sums
	LEAQ exp64c<>(SB), R11
	VBROADCASTSD 0(R11), Z20    // LOG2E
	VBROADCASTSD 8(R11), Z21    // LN2U
	VBROADCASTSD 16(R11), Z22   // LN2L
	VBROADCASTSD 24(R11), Z23   // 1/16
	VBROADCASTSD 88(R11), Z24   // 1
	VBROADCASTSD 96(R11), Z25   // 2
	VBROADCASTSD sumc<>+0(SB), Z26 // −708
	VBROADCASTSD sumc<>+8(SB), Z27 // 709
	MOVL $1023, R13
	MOVQ R13, X15
	VPBROADCASTD X15, Y31       // exponent bias
	KXORW  K7, K7, K7           // lanes out of range: none yet
	TESTQ R12, R12
	JZ    done

loop:
	LOAD8

	TRANSPOSE8

	SUMEXP(Y8)
	SUMEXP(Y9)
	SUMEXP(Y10)
	SUMEXP(Y11)
	SUMEXP(Y12)
	SUMEXP(Y13)
	SUMEXP(Y14)
	SUMEXP(Y15)

	ADDQ $32, R10
	DECQ R12
	JNZ  loop

done:
	MOVQ sums+40(FP), R13
	VMOVUPD Z30, (R13)
	KORTESTW K7, K7
	SETNE    special+48(FP)
	VZEROUPPER
	RET
