#!/usr/bin/env python3
"""Writes amx_amd64.s: the AMX-BF16 run kernels of the bf16 dot-product
path (amx.go). Go's assembler does not know the AMX instructions, so this
script encodes them with GNU as (binutils) and emits them as BYTE
directives; everything else is ordinary Go assembly.

    python3 gen_amx.py > amx_amd64.s   (needs as and objdump)
"""
from gnu_as import byte_line, encode

out = []
w = out.append


def amx(att, comment):
    """One AMX instruction (AT&T syntax for as) as BYTE directives."""
    w(byte_line(encode([att])[0], comment))


def run_kernel(name, prefetch):
    """nb blocks of B in one call; with prefetch, each block's steps ask
    for the next block into L2."""
    w("")
    w(f"// func {name}(nb, k32 int, b *uint16, ldb, bstep, bhalf, bblock uintptr, act *uint16, out *float32, cfg *byte, last uintptr)")
    w("//")
    w("// nb blocks of Cᵀ = B·Aᵀ, each 32 rows of B against the same 32 rows of")
    w("// A packed by packAMX (two runs of k32 1 KiB tiles, one run a half of the")
    w("// rows: row kk of step s's tile holds, for its 16 rows of A, the bf16")
    w("// pair at depth 32s+2kk, 32s+2kk+1). Where B's tiles are is given in")
    w("// bytes: a tile's 16 rows are ldb apart, a step of depth 32 moves bstep,")
    w("// a block's rows 16-31 start bhalf after its rows 0-15, the next block")
    w("// bblock after this one (B in place: 2k, 64, 16·2k, 32·2k). out receives")
    w("// the nb blocks of 32 × 32 float32 sums 4 KiB apart, each row-major, B's")
    w("// rows down, A's across (128 bytes a row). The tile configuration cfg")
    w("// (palette 1, eight tiles of 16 rows of 64 bytes) is loaded on entry and")
    w("// released on exit, so no tile state outlives the call: a goroutine may")
    w("// move to another thread between calls, never within one (Go does not")
    w("// preempt assembly).")
    w("//")
    if prefetch:
        w("// Each step of a block asks for 2 KiB of the next block (of the last")
        w("// block: of last, a plain address, as prefetches do not fault) into")
        w("// L2, 32 lines, so that it has arrived when the loop is done with this")
        w("// one (a block is 32 · 2k bytes, k32 steps of 2 KiB): the tile loads")
        w("// read 32 rows a line at a time, 32 streams that the hardware")
        w("// prefetchers follow less well than one.")
    else:
        w("// Nothing is prefetched (last is not read): for B already in cache,")
        w("// where the prefetches only cost issue slots.")
    w("//")
    w("// Tiles: T0-T3 the four 16 × 16 float32 quarters of a block, T4-T5 B's")
    w("// rows 0-15 and 16-31 (16 × 32 bf16), T6-T7 the packed A tiles.")
    w(f"TEXT ·{name}(SB), NOSPLIT, $0-88")
    w("\tMOVQ cfg+72(FP), AX")
    amx("ldtilecfg (%rax)", "LDTILECFG (AX)")
    w("\tMOVQ out+64(FP), AX")
    w("\tMOVQ b+16(FP), R13 // this block of B")
    w("\tMOVQ nb+0(FP), BX")
    w("\tMOVQ ldb+24(FP), DX")
    w("\tMOVQ bstep+32(FP), R11")
    w("\tMOVQ $64, R9 // a packed A tile's row pitch")
    w(f"{name}_block:")
    for t in range(4):
        amx(f"tilezero %tmm{t}", f"TILEZERO T{t}")
    w("\tMOVQ R13, SI")
    w("\tMOVQ bhalf+40(FP), R8")
    w("\tADDQ SI, R8 // B's row 16")
    w("\tMOVQ act+56(FP), DI")
    w("\tMOVQ k32+8(FP), CX")
    w("\tMOVQ CX, R10")
    w("\tSHLQ $10, R10")
    w("\tADDQ DI, R10 // the second half's run of A tiles")
    if prefetch:
        w("\tMOVQ bblock+48(FP), R12")
        w("\tADDQ R13, R12 // the next block, to prefetch")
        w("\tCMPQ BX, $1")
        w(f"\tJNE {name}_step")
        w("\tMOVQ last+80(FP), R12")
    w(f"{name}_step:")
    if prefetch:
        for line in range(32):
            w(f"\tPREFETCHT1 {64 * line}(R12)")
    amx("tileloadd (%rsi,%rdx,1), %tmm4", "TILELOADD (SI)(DX*1), T4")
    amx("tileloadd (%r8,%rdx,1), %tmm5", "TILELOADD (R8)(DX*1), T5")
    amx("tileloadd (%rdi,%r9,1), %tmm6", "TILELOADD (DI)(R9*1), T6")
    amx("tileloadd (%r10,%r9,1), %tmm7", "TILELOADD (R10)(R9*1), T7")
    amx("tdpbf16ps %tmm6, %tmm4, %tmm0", "TDPBF16PS T0 += T4·T6")
    amx("tdpbf16ps %tmm7, %tmm4, %tmm1", "TDPBF16PS T1 += T4·T7")
    amx("tdpbf16ps %tmm6, %tmm5, %tmm2", "TDPBF16PS T2 += T5·T6")
    amx("tdpbf16ps %tmm7, %tmm5, %tmm3", "TDPBF16PS T3 += T5·T7")
    w("\tADDQ R11, SI")
    w("\tADDQ R11, R8")
    w("\tADDQ $1024, DI")
    w("\tADDQ $1024, R10")
    if prefetch:
        w("\tADDQ $2048, R12")
    w("\tDECQ CX")
    w(f"\tJNZ {name}_step")
    w("\tLEAQ 2048(AX), CX // the block's row 16")
    w("\tMOVQ $128, DI // the block's row pitch")
    amx("tilestored %tmm0, (%rax,%rdi,1)", "TILESTORED T0, (AX)(DI*1)")
    amx("tilestored %tmm1, 64(%rax,%rdi,1)", "TILESTORED T1, 64(AX)(DI*1)")
    amx("tilestored %tmm2, (%rcx,%rdi,1)", "TILESTORED T2, (CX)(DI*1)")
    amx("tilestored %tmm3, 64(%rcx,%rdi,1)", "TILESTORED T3, 64(CX)(DI*1)")
    w("\tADDQ $4096, AX")
    w("\tADDQ bblock+48(FP), R13")
    w("\tDECQ BX")
    w(f"\tJNZ {name}_block")
    amx("tilerelease", "TILERELEASE")
    w("\tRET")


w("// Code generated by gen_amx.py; DO NOT EDIT.")
w("")
w('#include "textflag.h"')
run_kernel("amxRunBF16", True)
run_kernel("amxRunBF16NP", False)
print("\n".join(out))
