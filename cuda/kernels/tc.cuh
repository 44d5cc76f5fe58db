// Tensor-core and asynchronous-copy primitives of the bf16 attention
// kernels, as inline PTX, so that NVRTC compiles them without any toolkit
// header. The host emulator replaces this file with testdata/emu/tc_emu.h:
// the same functions computed from the PTX ISA's fragment layouts, plus the
// checks a GPU does not report (a divergent or partial warp at a
// warp-collective instruction, misaligned or out-of-bounds addresses, a read
// of cp.async data before its wait, ldmatrix bank conflicts).
//
// Every function takes generic pointers and converts to the shared window
// itself, so kernel code never handles 32-bit shared addresses. The
// instructions need sm_80 (bf16 mma, ldmatrix, cp.async); on older targets
// the bodies trap, and the launchers never choose these kernels there.
#pragma once

typedef unsigned int u32;

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define TC_ASM(...) asm volatile(__VA_ARGS__)
#else
#define TC_ASM(...) __trap()
#endif

__device__ __forceinline__ u32 tc_smem(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// tc_mma_bf16: d += a·b for a 16×16 bf16 A (row-major fragment a), a 16×8
// bf16 B (column-major fragment b) and a 16×8 float D, on the tensor cores
// (mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32). With g = lane/4
// and t = lane%4: a[0] holds A(g, 2t..2t+1), a[1] A(g+8, 2t..), a[2]
// A(g, 2t+8..), a[3] A(g+8, 2t+8..); b[0] B(2t..2t+1, g), b[1] B(2t+8.., g);
// d[0..1] D(g, 2t..2t+1), d[2..3] D(g+8, 2t..2t+1). D's layout is A's, so
// an accumulator packed to bf16 is the A operand of the next product.
__device__ __forceinline__ void tc_mma_bf16(float d[4], const u32 a[4], const u32 b[2]) {
    TC_ASM("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
           : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
           : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ldmatrix: four (x4) or two (x2) 8×8 bf16 matrices from shared memory;
// lane l gives the address of row l%8 of matrix l/8 (16 bytes, 16-byte
// aligned) and receives in r[j] its fragment of matrix j: row l/4,
// columns 2(l%4)..+1 (with .trans, the transposed matrix's).
__device__ __forceinline__ void tc_ldmatrix_x4(u32 r[4], const void* p) {
    TC_ASM("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
           : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tc_smem(p)));
}
__device__ __forceinline__ void tc_ldmatrix_x4_trans(u32 r[4], const void* p) {
    TC_ASM("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
           : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tc_smem(p)));
}
__device__ __forceinline__ void tc_ldmatrix_x2(u32 r[2], const void* p) {
    TC_ASM("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(tc_smem(p)));
}
__device__ __forceinline__ void tc_ldmatrix_x2_trans(u32 r[2], const void* p) {
    TC_ASM("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(tc_smem(p)));
}

// tc_cp_async16 copies 16 bytes from global to shared memory without
// passing through registers or L1 (cp.async.cg); src_bytes < 16 fills the
// rest with zeros, and 0 reads nothing (a row past a sequence's end), but
// src must still be an address inside the allocation. The data may be read
// only after tc_cp_wait has retired its group.
__device__ __forceinline__ void tc_cp_async16(void* dst, const void* src, int src_bytes) {
    TC_ASM("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(tc_smem(dst)), "l"(src), "r"(src_bytes) : "memory");
}
// tc_cp_commit closes the group of the copies issued since the last one.
__device__ __forceinline__ void tc_cp_commit() { TC_ASM("cp.async.commit_group;" ::: "memory"); }
// tc_cp_wait waits until at most N committed groups are still in flight.
template <int N> __device__ __forceinline__ void tc_cp_wait() { TC_ASM("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// tc_pack_bf16x2 rounds two floats to bf16 (to nearest even), lo in bits 0-15.
__device__ __forceinline__ u32 tc_pack_bf16x2(float lo, float hi) {
    u32 r = 0;
    TC_ASM("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// tc_exp2 is 2^x on the special-function unit (ex2.approx.ftz: about 2 ulp,
// far below the bf16 rounding of the probabilities it feeds); the softmax
// works in log2 units so that expf's longer sequence is never needed.
__device__ __forceinline__ float tc_exp2(float x) {
    float y = 0.0f;
    TC_ASM("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// tc_red_add adds v to *p atomically without returning the old value. The
// order of the additions varies between runs, so sums made of them are
// reproducible only to rounding (the deterministic paths avoid them).
__device__ __forceinline__ void tc_red_add(float* p, float v) {
    TC_ASM("red.global.add.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
}
// tc_red_add2 adds (a, b) to p[0..1], p 8-byte aligned: one vector
// reduction on sm_90 (half the L2 requests of two scalar ones).
__device__ __forceinline__ void tc_red_add2(float* p, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(a), "f"(b) : "memory");
#else
    tc_red_add(p, a);
    tc_red_add(p + 1, b);
#endif
}
