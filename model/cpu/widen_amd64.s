#include "textflag.h"

// func widenBF16AVX512(dst *float32, src *uint16, n int)
//
// dst[i] = the float32 whose high half is src[i], for i < n, n a multiple
// of 16: a bf16 value widened exactly (zero-extend, shift left 16), sixteen
// lanes at a time.
TEXT ·widenBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   done

loop:
	VPMOVZXWD (SI), Z0
	VPSLLD    $16, Z0, Z0
	VMOVDQU32 Z0, (DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop
	VZEROUPPER

done:
	RET

// func widenBF16AVX2(dst *float32, src *uint16, n int)
//
// widenBF16AVX512 eight lanes at a time, n a multiple of 8.
TEXT ·widenBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   done2

loop2:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  loop2
	VZEROUPPER

done2:
	RET
