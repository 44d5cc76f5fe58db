#include "textflag.h"

// Kernels of the cached (decode) attention, attention.go's loops in vector
// registers with their exact arithmetic (no FMA, the same order per lane).

// func dots4AVX(q, k *float32, ldk uintptr, n, hs int, out *float32)
//
// out[i] = dot(q, k + i·ldk bytes) for i < n, hs a multiple of 4, each as
// attention.go's dot: four partial sums (lane j takes elements ≡ j mod 4),
// then (s0 + s1) + (s2 + s3). Four keys at a time (X0..X3), then one.
TEXT ·dots4AVX(SB), NOSPLIT, $0-48
	MOVQ q+0(FP), SI
	MOVQ k+8(FP), DI
	MOVQ ldk+16(FP), R8
	MOVQ n+24(FP), CX
	MOVQ hs+32(FP), R9
	MOVQ out+40(FP), DX
	SHLQ $2, R9                  // hs in bytes
	LEAQ (R8)(R8*2), R10         // 3·ldk

four:
	CMPQ CX, $4
	JLT  one
	VXORPS X0, X0, X0
	VXORPS X1, X1, X1
	VXORPS X2, X2, X2
	VXORPS X3, X3, X3
	XORQ AX, AX
	MOVQ DI, BX

fourloop:
	VMOVUPS (SI)(AX*1), X4
	VMULPS  (BX)(AX*1), X4, X5
	VADDPS  X5, X0, X0
	LEAQ    (BX)(R8*1), R11
	VMULPS  (R11)(AX*1), X4, X5
	VADDPS  X5, X1, X1
	LEAQ    (BX)(R8*2), R11
	VMULPS  (R11)(AX*1), X4, X5
	VADDPS  X5, X2, X2
	LEAQ    (BX)(R10*1), R11
	VMULPS  (R11)(AX*1), X4, X5
	VADDPS  X5, X3, X3
	ADDQ    $16, AX
	CMPQ    AX, R9
	JLT     fourloop

	// (s0 + s1) + (s2 + s3) for each key.
	VMOVSHDUP X0, X5
	VADDPS    X5, X0, X0
	VMOVHLPS  X0, X0, X5
	VADDSS    X5, X0, X0
	VMOVSS    X0, 0(DX)
	VMOVSHDUP X1, X5
	VADDPS    X5, X1, X1
	VMOVHLPS  X1, X1, X5
	VADDSS    X5, X1, X1
	VMOVSS    X1, 4(DX)
	VMOVSHDUP X2, X5
	VADDPS    X5, X2, X2
	VMOVHLPS  X2, X2, X5
	VADDSS    X5, X2, X2
	VMOVSS    X2, 8(DX)
	VMOVSHDUP X3, X5
	VADDPS    X5, X3, X3
	VMOVHLPS  X3, X3, X5
	VADDSS    X5, X3, X3
	VMOVSS    X3, 12(DX)
	LEAQ (DI)(R8*4), DI
	ADDQ $16, DX
	SUBQ $4, CX
	JMP  four

one:
	TESTQ CX, CX
	JZ    done
	VXORPS X0, X0, X0
	XORQ AX, AX

oneloop:
	VMOVUPS (SI)(AX*1), X4
	VMULPS  (DI)(AX*1), X4, X5
	VADDPS  X5, X0, X0
	ADDQ    $16, AX
	CMPQ    AX, R9
	JLT     oneloop
	VMOVSHDUP X0, X5
	VADDPS    X5, X0, X0
	VMOVHLPS  X0, X0, X5
	VADDSS    X5, X0, X0
	VMOVSS    X0, 0(DX)
	ADDQ R8, DI
	ADDQ $4, DX
	DECQ CX
	JMP  one

done:
	VZEROUPPER
	RET

// func axpy32F64AVX512(acc *float64, v *float32, ldv uintptr, e *float64, n int)
//
// acc[c] += e[i]·float64(v[i·ldv bytes + c]) for i < n in order, c < 32:
// the product rounded, then the sum, per lane, as the Go loop does.
TEXT ·axpy32F64AVX512(SB), NOSPLIT, $0-40
	MOVQ acc+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ ldv+16(FP), R8
	MOVQ e+24(FP), DX
	MOVQ n+32(FP), CX
	VMOVUPD 0(DI), Z0
	VMOVUPD 64(DI), Z1
	VMOVUPD 128(DI), Z2
	VMOVUPD 192(DI), Z3
	TESTQ CX, CX
	JZ    axdone

axloop:
	VBROADCASTSD (DX), Z4
	VCVTPS2PD 0(SI), Z5
	VCVTPS2PD 32(SI), Z6
	VCVTPS2PD 64(SI), Z7
	VCVTPS2PD 96(SI), Z8
	VMULPD Z4, Z5, Z5
	VMULPD Z4, Z6, Z6
	VMULPD Z4, Z7, Z7
	VMULPD Z4, Z8, Z8
	VADDPD Z5, Z0, Z0
	VADDPD Z6, Z1, Z1
	VADDPD Z7, Z2, Z2
	VADDPD Z8, Z3, Z3
	ADDQ R8, SI
	ADDQ $8, DX
	DECQ CX
	JNZ  axloop

axdone:
	VMOVUPD Z0, 0(DI)
	VMOVUPD Z1, 64(DI)
	VMOVUPD Z2, 128(DI)
	VMOVUPD Z3, 192(DI)
	VZEROUPPER
	RET
