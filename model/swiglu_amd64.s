#include "textflag.h"

// func swigluTailAVX512(out, gate, up, ex *float32, n int)
//
// out[i] = float32(float64(gate[i]) / (1 + float64(ex[i])) * float64(up[i]))
// for i < n, n a multiple of 8: SwiGLU's last pass (swiglu.go) eight lanes
// at a time. Each lane does the scalar loop's IEEE operations in its order
// (widen, add, divide, multiply, round to float32 to nearest even), so the
// bits are the scalar loop's.
TEXT ·swigluTailAVX512(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ ex+24(FP), CX
	MOVQ n+32(FP), BX
	SHRQ $3, BX
	JZ   done
	MOVQ $0x3FF0000000000000, AX // 1.0
	VPBROADCASTQ AX, Z15

loop:
	VCVTPS2PD (SI), Z0
	VCVTPS2PD (CX), Z1
	VADDPD    Z15, Z1, Z1
	VDIVPD    Z1, Z0, Z0
	VCVTPS2PD (DX), Z2
	VMULPD    Z2, Z0, Z0
	VCVTPD2PS Z0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, CX
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ BX
	JNZ  loop
	VZEROUPPER

done:
	RET

// func negateAVX512(dst, src *float32, n int)
//
// dst[i] = −src[i] for i < n, n a multiple of 16: the sign bit flipped, as
// Go's negation does (NaNs keep their payload).
TEXT ·negateAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   negdone
	MOVL $0x80000000, AX
	VPBROADCASTD AX, Z1

negloop:
	VPXORD  (SI), Z1, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  negloop
	VZEROUPPER

negdone:
	RET
