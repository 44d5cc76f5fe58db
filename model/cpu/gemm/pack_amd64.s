#include "textflag.h"

// func transpose8AVX(src *float32, lds uintptr, dst *float32, ldd uintptr, blocks int)
// Transposes blocks consecutive 8×8 blocks: block b reads 8 floats at
// src + r·lds + 32·b for rows r < 8 and writes row p of its transpose (the
// p-th float of every source row) at dst + (8·b + p)·ldd. lds and ldd are in
// bytes. Unpack pairs, then shuffle quads, then swap 128-bit lanes.
TEXT ·transpose8AVX(SB), NOSPLIT, $0-40
	MOVQ src+0(FP), SI
	MOVQ lds+8(FP), R8
	MOVQ dst+16(FP), DI
	MOVQ ldd+24(FP), DX
	MOVQ blocks+32(FP), CX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10
	LEAQ (DX)(DX*2), R11
	LEAQ (DI)(DX*4), R12
	MOVQ DX, R13
	SHLQ $3, R13
	TESTQ CX, CX
	JZ   done

loop:
	VMOVUPS (SI), Y0
	VMOVUPS (SI)(R8*1), Y1
	VMOVUPS (SI)(R8*2), Y2
	VMOVUPS (SI)(R9*1), Y3
	VMOVUPS (R10), Y4
	VMOVUPS (R10)(R8*1), Y5
	VMOVUPS (R10)(R8*2), Y6
	VMOVUPS (R10)(R9*1), Y7

	VUNPCKLPS Y1, Y0, Y8  // a0 b0 a1 b1 | a4 b4 a5 b5
	VUNPCKHPS Y1, Y0, Y9  // a2 b2 a3 b3 | a6 b6 a7 b7
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15

	VSHUFPS $0x44, Y10, Y8, Y0  // a0 b0 c0 d0 | a4 b4 c4 d4
	VSHUFPS $0xEE, Y10, Y8, Y1  // a1 b1 c1 d1 | a5 ...
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4 // e0 f0 g0 h0 | e4 ...
	VSHUFPS $0xEE, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xEE, Y15, Y13, Y7

	VPERM2F128 $0x20, Y4, Y0, Y8  // a0 .. h0
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12 // a4 .. h4
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15

	VMOVUPS Y8, (DI)
	VMOVUPS Y9, (DI)(DX*1)
	VMOVUPS Y10, (DI)(DX*2)
	VMOVUPS Y11, (DI)(R11*1)
	VMOVUPS Y12, (R12)
	VMOVUPS Y13, (R12)(DX*1)
	VMOVUPS Y14, (R12)(DX*2)
	VMOVUPS Y15, (R12)(R11*1)

	ADDQ $32, SI
	ADDQ $32, R10
	ADDQ R13, DI
	ADDQ R13, R12
	DECQ CX
	JNZ  loop

done:
	VZEROUPPER
	RET
