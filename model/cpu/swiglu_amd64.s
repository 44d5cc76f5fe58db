#include "textflag.h"
#include "exp32_amd64.h"

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

// func swiglu32AVX512(out, gate, up *float32, n int, c *[12]float32) (special bool)
//
// silu32 of each gate and up (swiglu.go), sixteen lanes at a time, n a
// multiple of 16: e = exp32(−gate) by exp32AVX512's operations
// (constants c as there), then out = gate / (1 + e) · up; a NaN gate's
// NaN passes through. The lanes with −gate above expHi, which
// exp32AVX512 leaves to exp32, are reported (special) for the caller to
// redo. The same bits as silu32.
TEXT ·swiglu32AVX512(SB), NOSPLIT, $0-41
	MOVQ out+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ c+32(FP), BX
	EXP32CONSTS(BX)
	MOVL $0x80000000, AX
	VPBROADCASTD AX, Z28 // the sign bit
	KXORW K3, K3, K3
	SHRQ $4, CX
	JZ   fdone

floop:
	VMOVUPS (SI), Z6           // gate
	VPXORD  Z28, Z6, Z0        // x = −gate
	EXP32                      // Z5 = e^x, 0 below expLo
	VCMPPS  $0x1e, Z26, Z0, K4 // x > expHi
	KORW    K4, K3, K3         // above expHi: reported
	VADDPS  Z24, Z5, Z5        // 1 + e
	VDIVPS  Z5, Z6, Z6         // gate / (1 + e)
	VMULPS  (DX), Z6, Z6       // · up
	VMOVUPS Z6, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ CX
	JNZ  floop

fdone:
	KORTESTW K3, K3
	SETNE    special+40(FP)
	VZEROUPPER
	RET
