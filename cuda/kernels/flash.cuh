// Helpers of the tensor-core attention kernels (attention_tc.cu,
// attention_tc_bwd.cu): the swizzled shared tiles, their cp.async loads,
// the ldmatrix fragments of each operand role, and quad reductions.
//
// Shared tiles are [rows][HS] bf16 whose 16-byte chunks are XOR-swizzled by
// row % 8: the eight rows one ldmatrix phase reads then fall in eight
// different bank groups (unswizzled, 128- and 256-byte rows put them all in
// one).
#pragma once
#include "common.cuh"
#include "tc.cuh"

#define FA_WARPS 4
#define FA_THREADS 128
#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.6931471805599453f

template <int HS> __device__ __forceinline__ int fa_swz(int row, int col) {
    return row * HS + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

// fa_load_rows issues cp.async copies of ROWS rows of HS bf16 (row stride
// ld) into the swizzled tile dst; rows at or past valid are zero-filled and
// read nothing (their source is src itself, which is inside the buffer).
template <int HS, int ROWS, int THREADS = FA_THREADS>
__device__ __forceinline__ void fa_load_rows(bf16* dst, const bf16* src, long long ld, int valid) {
    constexpr int CH = HS / 8;
    for (int c = threadIdx.x; c < ROWS * CH; c += THREADS) {
        int r = c / CH, ch = c - r * CH;
        bool ok = r < valid;
        tc_cp_async16(&dst[fa_swz<HS>(r, ch * 8)], src + (ok ? (long long)r * ld + ch * 8 : 0), ok ? 16 : 0);
    }
}

// fa_frag_a loads the A fragment of rows r0..r0+15, columns c0..c0+15 of a
// swizzled [rows][HS] tile (a row-major operand: queries × dims).
template <int HS> __device__ __forceinline__ void fa_frag_a(u32 a[4], const bf16* s, int r0, int c0) {
    int lane = threadIdx.x & 31;
    tc_ldmatrix_x4(a, &s[fa_swz<HS>(r0 + (lane & 15), c0 + (lane >> 4) * 8)]);
}

// fa_frag_b_rows loads B fragments for two n8 tiles from a tile whose rows
// are the n dimension (K as the B of Q·Kᵀ): rows n0..n0+15, columns (the k
// dimension) c0..c0+15; b[0..1] serve rows n0..n0+7, b[2..3] n0+8..n0+15.
template <int HS> __device__ __forceinline__ void fa_frag_b_rows(u32 b[4], const bf16* s, int n0, int c0) {
    int lane = threadIdx.x & 31;
    tc_ldmatrix_x4(b, &s[fa_swz<HS>(n0 + (lane & 7) + ((lane >> 4) << 3), c0 + ((lane >> 3) & 1) * 8)]);
}

// fa_frag_b_cols loads B fragments for two n8 tiles from a tile whose rows
// are the k dimension (V as the B of P·V): rows k0..k0+15, columns (the n
// dimension) n0..n0+15, transposed by ldmatrix; b[0..1] serve columns
// n0..n0+7, b[2..3] n0+8..n0+15.
template <int HS> __device__ __forceinline__ void fa_frag_b_cols(u32 b[4], const bf16* s, int k0, int n0) {
    int lane = threadIdx.x & 31;
    tc_ldmatrix_x4_trans(b, &s[fa_swz<HS>(k0 + (lane & 7) + ((lane >> 3) & 1) * 8, n0 + (lane >> 4) * 8)]);
}

// fa_pack_a packs the accumulators of 16 columns (two n8 tiles c0, c1) into
// the A fragment of the next product, whose k dimension they are.
__device__ __forceinline__ void fa_pack_a(u32 a[4], const float c0[4], const float c1[4]) {
    a[0] = tc_pack_bf16x2(c0[0], c0[1]);
    a[1] = tc_pack_bf16x2(c0[2], c0[3]);
    a[2] = tc_pack_bf16x2(c1[0], c1[1]);
    a[3] = tc_pack_bf16x2(c1[2], c1[3]);
}

// The max over the four lanes of a quad, which share a row of an accumulator.
__device__ __forceinline__ float fa_quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float fa_quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

