#include "textflag.h"

// func addAVX512(dst, a, b *float32, n int)
//
// dst[i] = a[i] + b[i] for i < n, n a multiple of 64: float32 adds, the
// scalar loop's bits; dst may be a or b.
TEXT ·addAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $6, CX
	JZ   adone

aloop:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	VMOVUPS 128(SI), Z2
	VMOVUPS 192(SI), Z3
	VADDPS  (DX), Z0, Z0
	VADDPS  64(DX), Z1, Z1
	VADDPS  128(DX), Z2, Z2
	VADDPS  192(DX), Z3, Z3
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	ADDQ $256, SI
	ADDQ $256, DX
	ADDQ $256, DI
	DECQ CX
	JNZ  aloop
	VZEROUPPER

adone:
	RET
