// Constants of the kernels against a bf16 KV cache, at both tiers
// (attn_bf16_amd64.s, attn_bf16_avx2_amd64.s; each file gets its own
// copy). A dword of a bf16 row holds element 2j in its low half and
// 2j + 1 in its high half: shifted left by 16 it is the even element as
// float32, masked to its high half (bf16HiHalf) the odd one, so nothing
// is shuffled. f32NegInf starts the softmax's largest scores; a score
// whose magnitude (f32Abs) is not below f32PosInf is a NaN or an infinity.

DATA bf16HiHalf<>+0(SB)/4, $0xffff0000
GLOBL bf16HiHalf<>(SB), RODATA|NOPTR, $4
DATA f32NegInf<>+0(SB)/4, $0xff800000
GLOBL f32NegInf<>(SB), RODATA|NOPTR, $4
DATA f32Abs<>+0(SB)/4, $0x7fffffff
GLOBL f32Abs<>(SB), RODATA|NOPTR, $4
DATA f32PosInf<>+0(SB)/4, $0x7f800000
GLOBL f32PosInf<>(SB), RODATA|NOPTR, $4
