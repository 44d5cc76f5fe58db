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


def run_kernel(name, prefetch, touch=False):
    """nb blocks in one call; with prefetch, each block's steps ask for
    the next block of the streamed operand into L2, with PREFETCHT1 or,
    with touch, by AVX-512 loads of its lines."""
    w("")
    w(f"// func {name}(nb, k32 int, l *uint16, lld, lstep, lhalf, lblock uintptr, r *uint16, rblock uintptr, out *float32, opitch, ohalf, oblock uintptr, cfg *byte, pf, pfstride, last uintptr)")
    w("//")
    w("// nb blocks of 32 × 32 float32 sums, each the product of 32 rows of the")
    w("// left operand l with 32 rows of the right operand r over depth 32·k32.")
    w("// The left operand's tiles are 16 rows of 32 bf16 values, rows lld bytes")
    w("// apart; a step of depth moves lstep bytes, rows 16-31 start lhalf after")
    w("// rows 0-15, the next block lblock after this one. The right operand is")
    w("// packed in pairs by packAMX (two runs of k32 1 KiB tiles, one run a half")
    w("// of the rows: row kk of step s's tile holds, for its 16 rows, the bf16")
    w("// pair at depth 32s+2kk, 32s+2kk+1); its next block starts rblock bytes")
    w("// after this one. The sums of left row i with right row j go to out at")
    w("// row i, column j: rows opitch bytes apart, rows 16-31 ohalf after rows")
    w("// 0-15, the next block oblock after this one. The driver uses it with B")
    w("// (the weights, read in place) on the left and A packed on the right,")
    w("// writing Cᵀ's blocks to a buffer; the benchmarks also with A in place on")
    w("// the left and B packed on the right, writing C itself. The tile")
    w("// configuration cfg (palette 1, eight tiles of 16 rows of 64 bytes) is")
    w("// loaded on entry and released on exit, so no tile state outlives the")
    w("// call: a goroutine may move to another thread between calls, never")
    w("// within one (Go does not preempt assembly).")
    w("//")
    if touch:
        w("// Each step of block q loads 2 KiB at pf + q·pfstride (of the last")
        w("// block: at last) into a vector register it discards, 32 lines of")
        w("// AVX-512 loads: amxRunBF16's prefetch done by ordinary loads, which")
        w("// train the hardware prefetchers as the read probe's do, for the")
        w("// benchmarks to set beside it (R1GO_AMX_STREAM=avx). pf + q·pfstride")
        w("// and last must be readable for the block's 2·k32 KiB.")
    elif prefetch:
        w("// Each step of block q asks for 2 KiB at pf + q·pfstride (of the last")
        w("// block: at last, a plain address, as prefetches do not fault) into L2,")
        w("// 32 lines, so that the next block of the operand streamed from memory")
        w("// has arrived when the loop is done with this one (a block of B is")
        w("// 32 · 2k bytes, k32 steps of 2 KiB): the tile loads read 32 rows a line")
        w("// at a time, 32 streams that the hardware prefetchers follow less well")
        w("// than one.")
    else:
        w("// Nothing is prefetched (pf and last are not read): for operands")
        w("// already in cache, where the prefetches only cost issue slots.")
    w("//")
    w("// Tiles: T0-T3 the four 16 × 16 float32 quarters of a block, T4-T5 the")
    w("// left operand's rows 0-15 and 16-31 (16 × 32 bf16), T6-T7 the right")
    w("// operand's packed tiles.")
    w(f"TEXT ·{name}(SB), NOSPLIT, $0-136")
    w("\tMOVQ cfg+104(FP), AX")
    amx("ldtilecfg (%rax)", "LDTILECFG (AX)")
    w("\tMOVQ out+72(FP), AX")
    w("\tMOVQ l+16(FP), R13 // this block of the left operand")
    w("\tMOVQ r+56(FP), R14 // this block of the right operand")
    if prefetch:
        w("\tMOVQ pf+112(FP), R15 // what this block prefetches")
    w("\tMOVQ nb+0(FP), BX")
    w("\tMOVQ lld+24(FP), DX")
    w("\tMOVQ lstep+32(FP), R11")
    w("\tMOVQ $64, R9 // a packed tile's row pitch")
    w(f"{name}_block:")
    for t in range(4):
        amx(f"tilezero %tmm{t}", f"TILEZERO T{t}")
    w("\tMOVQ R13, SI")
    w("\tMOVQ lhalf+40(FP), R8")
    w("\tADDQ SI, R8 // the left operand's row 16")
    w("\tMOVQ R14, DI")
    w("\tMOVQ k32+8(FP), CX")
    w("\tMOVQ CX, R10")
    w("\tSHLQ $10, R10")
    w("\tADDQ DI, R10 // the right operand's second run of tiles")
    if prefetch:
        w("\tMOVQ R15, R12")
        w("\tCMPQ BX, $1")
        w(f"\tJNE {name}_step")
        w("\tMOVQ last+128(FP), R12")
    w(f"{name}_step:")
    if touch:
        for line in range(32):
            w(f"\tVPORQ {64 * line}(R12), Z0, Z0")
    elif prefetch:
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
    w("\tMOVQ ohalf+88(FP), CX")
    w("\tADDQ AX, CX // the block's row 16")
    w("\tMOVQ opitch+80(FP), DI")
    amx("tilestored %tmm0, (%rax,%rdi,1)", "TILESTORED T0, (AX)(DI*1)")
    amx("tilestored %tmm1, 64(%rax,%rdi,1)", "TILESTORED T1, 64(AX)(DI*1)")
    amx("tilestored %tmm2, (%rcx,%rdi,1)", "TILESTORED T2, (CX)(DI*1)")
    amx("tilestored %tmm3, 64(%rcx,%rdi,1)", "TILESTORED T3, 64(CX)(DI*1)")
    w("\tADDQ oblock+96(FP), AX")
    w("\tADDQ lblock+48(FP), R13")
    w("\tADDQ rblock+64(FP), R14")
    if prefetch:
        w("\tADDQ pfstride+120(FP), R15")
    w("\tDECQ BX")
    w(f"\tJNZ {name}_block")
    amx("tilerelease", "TILERELEASE")
    if touch:
        w("\tVZEROUPPER")
    w("\tRET")


def stream_kernel(name, tiles, avx_ahead, pf_ahead, doc):
    """A stream of steps of 2 KiB with no arithmetic: the run kernel's
    reads of its streamed operand alone, in one of the ways of issuing
    them (tile loads, AVX loads ahead, prefetches ahead)."""
    w("")
    w(f"// func {name}(p *uint16, steps int, cfg *byte, out *uint16, ahead uintptr)")
    w("//")
    for line in doc:
        w("// " + line if line else "//")
    w(f"TEXT ·{name}(SB), NOSPLIT, $0-40")
    w("\tMOVQ p+0(FP), SI")
    w("\tMOVQ steps+8(FP), CX")
    w("\tMOVQ ahead+32(FP), R8")
    w("\tMOVQ $64, R9 // a packed tile's row pitch")
    if tiles:
        w("\tMOVQ cfg+16(FP), AX")
        amx("ldtilecfg (%rax)", "LDTILECFG (AX)")
    w("\tVPXORQ Z0, Z0, Z0")
    w("\tTESTQ CX, CX")
    w(f"\tJZ {name}_done")
    w(f"{name}_step:")
    if avx_ahead:
        for line in range(32):
            w(f"\tVPORQ {64 * line}(SI)(R8*1), Z0, Z0")
    if pf_ahead:
        for line in range(32):
            w(f"\tPREFETCHT1 {64 * line}(SI)(R8*1)")
    if tiles:
        w("\tLEAQ 1024(SI), R10")
        amx("tileloadd (%rsi,%r9,1), %tmm6", "TILELOADD (SI)(R9*1), T6")
        amx("tileloadd (%r10,%r9,1), %tmm7", "TILELOADD (R10)(R9*1), T7")
    else:
        for line in range(32):
            w(f"\tVPORQ {64 * line}(SI), Z0, Z0")
    w("\tADDQ $2048, SI")
    w("\tDECQ CX")
    w(f"\tJNZ {name}_step")
    w(f"{name}_done:")
    w("\tMOVQ out+24(FP), DI")
    w("\tVMOVDQU64 Z0, (DI)")
    if tiles:
        amx("tilestored %tmm7, 64(%rdi,%r9,1)", "TILESTORED T7, 64(DI)(R9*1)")
        amx("tilerelease", "TILERELEASE")
    w("\tVZEROUPPER")
    w("\tRET")


w("// Code generated by gen_amx.py; DO NOT EDIT.")
w("")
w('#include "textflag.h"')
run_kernel("amxRunBF16", True)
run_kernel("amxRunBF16NP", False)
run_kernel("amxRunBF16AVX", True, touch=True)
stream_kernel("amxStreamAVX", False, False, False, [
    "Reads steps · 2 KiB from p with AVX-512 loads, the read probe's way,",
    "OR-ing them into the 64 bytes written to out (ahead and cfg unused):",
    "the denominator of BenchmarkAMXStream's shapes of the same stream."])
stream_kernel("amxStreamTiles", True, False, False, [
    "Reads steps · 2 KiB from p as the run kernels read a packed operand,",
    "two 1 KiB tiles a step (TILELOADD), and nothing else; the last tile",
    "goes to out + 64 (1 KiB) and zeros to out's first 64 bytes.",
    "The tile configuration cfg is loaded and released."])
stream_kernel("amxStreamTilesPF", True, False, True, [
    "amxStreamTiles with the run kernel's prefetch: each step also asks for",
    "its 2 KiB ahead bytes on (PREFETCHT1, 32 lines) into L2."])
stream_kernel("amxStreamTilesAVX", True, True, False, [
    "amxStreamTiles with AVX-512 loads of each step's 2 KiB ahead bytes on,",
    "OR-ed into out's first 64 bytes: the hardware prefetchers trained by",
    "ordinary loads, the tile loads finding the lines in cache."])
print("\n".join(out))
