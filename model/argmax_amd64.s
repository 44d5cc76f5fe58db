#include "textflag.h"

// func maxAVX512(x *float32, n16 int) (m float32, nan bool)
// The largest of x[0 : 16·n16] and whether any of them is NaN (then m is
// meaningless). Four accumulators hide VMAXPS's latency; VMAXPS returns
// its second source when either is NaN, so the NaN check is separate.
TEXT ·maxAVX512(SB), NOSPLIT, $0-21
	MOVQ x+0(FP), SI
	MOVQ n16+8(FP), CX
	VMOVUPS (SI), Z0
	VMOVAPS Z0, Z1
	VMOVAPS Z0, Z2
	VMOVAPS Z0, Z3
	KXORW K2, K2, K2
	CMPQ CX, $4
	JB   tail

loop4:
	VMOVUPS (SI), Z4
	VMOVUPS 64(SI), Z5
	VMOVUPS 128(SI), Z6
	VMOVUPS 192(SI), Z7
	VMAXPS  Z4, Z0, Z0
	VMAXPS  Z5, Z1, Z1
	VMAXPS  Z6, Z2, Z2
	VMAXPS  Z7, Z3, Z3
	VCMPPS  $3, Z4, Z4, K1 // unordered: NaN lanes
	KORW    K1, K2, K2
	VCMPPS  $3, Z5, Z5, K1
	KORW    K1, K2, K2
	VCMPPS  $3, Z6, Z6, K1
	KORW    K1, K2, K2
	VCMPPS  $3, Z7, Z7, K1
	KORW    K1, K2, K2
	ADDQ    $256, SI
	SUBQ    $4, CX
	CMPQ    CX, $4
	JAE     loop4

tail:
	TESTQ CX, CX
	JZ    reduce

loop1:
	VMOVUPS (SI), Z4
	VMAXPS  Z4, Z0, Z0
	VCMPPS  $3, Z4, Z4, K1
	KORW    K1, K2, K2
	ADDQ    $64, SI
	DECQ    CX
	JNZ     loop1

reduce:
	VMAXPS        Z1, Z0, Z0
	VMAXPS        Z3, Z2, Z2
	VMAXPS        Z2, Z0, Z0
	VEXTRACTF32X8 $1, Z0, Y1
	VMAXPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0x4e, X0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0xb1, X0, X1
	VMAXPS        X1, X0, X0
	VMOVSS        X0, m+16(FP)
	KORTESTW      K2, K2
	SETNE         nan+20(FP)
	VZEROUPPER
	RET

// func firstEqualAVX512(x *float32, n16 int, v float32) int
// The first i < 16·n16 with x[i] == v (as ==: +0 equals −0), or −1.
TEXT ·firstEqualAVX512(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         n16+8(FP), CX
	VBROADCASTSS v+16(FP), Z0
	XORQ         AX, AX
	TESTQ        CX, CX
	JZ           none

scan:
	VCMPPS   $0, (SI)(AX*4), Z0, K1 // equal, ordered
	KORTESTW K1, K1
	JNE      found
	ADDQ     $16, AX
	DECQ     CX
	JNZ      scan

none:
	MOVQ $-1, ret+24(FP)
	VZEROUPPER
	RET

found:
	KMOVW   K1, DX
	TZCNTL  DX, DX
	ADDQ    DX, AX
	MOVQ    AX, ret+24(FP)
	VZEROUPPER
	RET
