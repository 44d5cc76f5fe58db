// exp32's vector steps, shared by the kernels that take e^x of float32
// lanes (exp_amd64.s, swiglu_amd64.s, sample32_amd64.s and the bf16
// cache's softmax, attn_bf16*_amd64.s): its operations in its order
// (model/exp.go), separate multiplies and adds (no FMA), floor by
// rounding down, the scale 2^n built in the exponent field.

// EXP32CONSTS loads from c (a register holding &expConsts) log2e, 0.5,
// ln2hi, ln2lo, 1/720, 1/120, 1/24, 1/6, 1, expLo and expHi into
// Z16-Z26, and 127 into Z27 (AX clobbered).
#define EXP32CONSTS(c) \
	VBROADCASTSS 0(c), Z16 \
	VBROADCASTSS 4(c), Z17 \
	VBROADCASTSS 8(c), Z18 \
	VBROADCASTSS 12(c), Z19 \
	VBROADCASTSS 16(c), Z20 \
	VBROADCASTSS 20(c), Z21 \
	VBROADCASTSS 24(c), Z22 \
	VBROADCASTSS 28(c), Z23 \
	VBROADCASTSS 32(c), Z24 \
	VBROADCASTSS 36(c), Z25 \
	VBROADCASTSS 40(c), Z26 \
	MOVL         $127, AX \
	VPBROADCASTD AX, Z27

// EXP32 sets Z5 to e^x of the lanes of Z0 as exp32 computes it, 0 below
// expLo, a NaN lane's polynomial kept (Z1-Z4 and K1, K2 clobbered; the
// lanes above expHi, which exp32 leaves to math.Exp, are the caller's to
// find: VCMPPS $0x1e, Z26, Z0).
#define EXP32 \
	VMULPS      Z16, Z0, Z1 \
	VADDPS      Z17, Z1, Z1 \
	VRNDSCALEPS $9, Z1, Z1 \
	VMULPS      Z18, Z1, Z2 \
	VSUBPS      Z2, Z0, Z2 \
	VMULPS      Z19, Z1, Z3 \
	VSUBPS      Z3, Z2, Z2 \
	VMULPS      Z20, Z2, Z3 \
	VADDPS      Z21, Z3, Z3 \
	VMULPS      Z2, Z3, Z3 \
	VADDPS      Z22, Z3, Z3 \
	VMULPS      Z2, Z3, Z3 \
	VADDPS      Z23, Z3, Z3 \
	VMULPS      Z2, Z3, Z3 \
	VADDPS      Z17, Z3, Z3 \
	VMULPS      Z2, Z3, Z3 \
	VADDPS      Z24, Z3, Z3 \
	VMULPS      Z2, Z3, Z3 \
	VADDPS      Z24, Z3, Z3 \
	VCVTTPS2DQ  Z1, Z4 \
	VPADDD      Z27, Z4, Z4 \
	VPSLLD      $23, Z4, Z4 \
	VMULPS      Z4, Z3, Z3 \
	VCMPPS      $0x1d, Z25, Z0, K1 \
	VCMPPS      $0x03, Z0, Z0, K2 \
	KORW        K2, K1, K1 \
	VMOVUPS.Z   Z3, K1, Z5

// EXP32YCONSTS loads from c (a register holding &expConsts) log2e, 0.5,
// ln2hi, ln2lo, 1 and expLo into Y8-Y13, and 127 into Y15 (AX clobbered):
// EXP32Y's constants in 256-bit registers (the avx2 tier).
#define EXP32YCONSTS(c) \
	VBROADCASTSS 0(c), Y8 \
	VBROADCASTSS 4(c), Y9 \
	VBROADCASTSS 8(c), Y10 \
	VBROADCASTSS 12(c), Y11 \
	VBROADCASTSS 32(c), Y12 \
	VBROADCASTSS 36(c), Y13 \
	MOVL         $127, AX \
	MOVQ         AX, X15 \
	VPBROADCASTD X15, Y15

// EXP32Y sets Y3 to e^x of the lanes of Y0 as exp32 computes it, 0 below
// expLo (false for NaN); DX holds &expConsts, whose polynomial terms it
// reads from memory (Y1, Y2, Y4 clobbered). The lanes above expHi and the
// NaN lanes, whose values are garbage, are the caller's to find.
#define EXP32Y \
	VMULPS   Y8, Y0, Y1 \
	VADDPS   Y9, Y1, Y1 \
	VROUNDPS $9, Y1, Y1 \
	VMULPS   Y10, Y1, Y2 \
	VSUBPS   Y2, Y0, Y2 \
	VMULPS   Y11, Y1, Y3 \
	VSUBPS   Y3, Y2, Y2 \
	VBROADCASTSS 16(DX), Y3 \
	VMULPS   Y3, Y2, Y3 \
	VBROADCASTSS 20(DX), Y4 \
	VADDPS   Y4, Y3, Y3 \
	VMULPS   Y2, Y3, Y3 \
	VBROADCASTSS 24(DX), Y4 \
	VADDPS   Y4, Y3, Y3 \
	VMULPS   Y2, Y3, Y3 \
	VBROADCASTSS 28(DX), Y4 \
	VADDPS   Y4, Y3, Y3 \
	VMULPS   Y2, Y3, Y3 \
	VADDPS   Y9, Y3, Y3 \
	VMULPS   Y2, Y3, Y3 \
	VADDPS   Y12, Y3, Y3 \
	VMULPS   Y2, Y3, Y3 \
	VADDPS   Y12, Y3, Y3 \
	VCVTTPS2DQ Y1, Y4 \
	VPADDD   Y15, Y4, Y4 \
	VPSLLD   $23, Y4, Y4 \
	VMULPS   Y4, Y3, Y3 \
	VCMPPS   $0x11, Y13, Y0, Y4 \
	VANDNPS  Y3, Y4, Y3
