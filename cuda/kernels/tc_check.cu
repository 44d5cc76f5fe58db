// Self-test kernels of tc.cuh (tc_test.go runs them on the GPU and on the
// host emulator, whose tc_emu.h they check in turn), and tc_mma_peak, the
// mma.sync ceiling the benchmarks report beside the attention kernels.
#include "common.cuh"
#include "tc.cuh"

// Element offset of (row, col) in a [64][64] bf16 tile. A row is 128 bytes,
// eight 16-byte chunks, so the eight rows an ldmatrix phase reads sit in one
// quad of banks (8 wavefronts); XOR-ing the chunk with row%8 spreads them
// over all eight quads (one wavefront).
__device__ __forceinline__ int tile_at(int row, int col, int swizzle) {
    int chunk = col >> 3;
    if (swizzle) chunk ^= row & 7;
    return row * 64 + chunk * 8 + (col & 7);
}

// tc_check_gemm: C = A·B for one 64×64×64 tile through the path of the
// attention kernels: global → cp.async → (swizzled) shared tile → ldmatrix →
// mma. A is [M][K]; B is [N][K] (kn = 0: keys as rows, QKᵀ, plain ldmatrix)
// or [K][N] (kn = 1: values as rows, PV, ldmatrix .trans); C is [M][N]
// float. Four warps, 16 rows of C each; 16 KiB of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(128) tc_check_gemm(float* C, const bf16* A, const bf16* B, int kn, int swizzle) {
    extern __shared__ bf16 smem[];
    bf16* As = smem;
    bf16* Bs = smem + 64 * 64;
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    for (int c = tid; c < 64 * 8; c += 128) {
        int row = c >> 3, col = (c & 7) * 8;
        tc_cp_async16(&As[tile_at(row, col, swizzle)], &A[row * 64 + col], 16);
        tc_cp_async16(&Bs[tile_at(row, col, swizzle)], &B[row * 64 + col], 16);
    }
    tc_cp_commit();
    tc_cp_wait<0>();
    __syncthreads();
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
    for (int k0 = 0; k0 < 64; k0 += 16) {
        // Matrix j = lane/8 of the A fragment: rows +8·(j%2), columns +8·(j/2).
        u32 a[4];
        tc_ldmatrix_x4(a, &As[tile_at(warp * 16 + (lane & 15), k0 + (lane >> 4) * 8, swizzle)]);
#pragma unroll
        for (int n0 = 0; n0 < 64; n0 += 16) {
            // b[0..1] for columns n0..n0+7, b[2..3] for n0+8..n0+15.
            u32 b[4];
            if (kn == 0)
                tc_ldmatrix_x4(b, &Bs[tile_at(n0 + (lane & 7) + (lane >> 4) * 8, k0 + ((lane >> 3) & 1) * 8, swizzle)]);
            else
                tc_ldmatrix_x4_trans(b, &Bs[tile_at(k0 + (lane & 7) + ((lane >> 3) & 1) * 8, n0 + (lane >> 4) * 8, swizzle)]);
            tc_mma_bf16(acc[n0 / 8], a, b);
            tc_mma_bf16(acc[n0 / 8 + 1], a, b + 2);
        }
    }
    int row = warp * 16 + (lane >> 2), col = 2 * (lane & 3);
#pragma unroll
    for (int j = 0; j < 8; j++) {
        C[row * 64 + j * 8 + col] = acc[j][0];
        C[row * 64 + j * 8 + col + 1] = acc[j][1];
        C[(row + 8) * 64 + j * 8 + col] = acc[j][2];
        C[(row + 8) * 64 + j * 8 + col + 1] = acc[j][3];
    }
}

// tc_check_early_read copies a [64][64] tile with cp.async and, wrongly,
// reads element tid (copied by thread tid/8) after the barrier but before
// waiting: out[tid] is whatever that read saw. out[128 + tid] is the same
// element read correctly, after the wait and a second barrier.
extern "C" __global__ void __launch_bounds__(128) tc_check_early_read(float* out, const bf16* A) {
    extern __shared__ bf16 smem[];
    int tid = threadIdx.x;
    for (int c = tid; c < 64 * 8; c += 128) tc_cp_async16(&smem[c * 8], &A[c * 8], 16);
    tc_cp_commit();
    __syncthreads();
    out[tid] = bf16_to_float(smem[tid]);
    tc_cp_wait<0>();
    __syncthreads();
    out[128 + tid] = bf16_to_float(smem[tid]);
}

// tc_check_fault breaks one rule of the tensor-core instructions per case,
// for the emulator to catch (never launched on a GPU): one warp, 1 KiB of
// dynamic shared memory, src an allocation of n bf16 values.
extern "C" __global__ void __launch_bounds__(32) tc_check_fault(float* out, const bf16* src, int n, int which) {
    extern __shared__ bf16 smem[];
    int lane = threadIdx.x;
    u32 a[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0};
    float d[4] = {0, 0, 0, 0};
    switch (which) {
    case 0: // a divergent warp: two halves at two different mma instructions
        if (lane < 16)
            tc_mma_bf16(d, a, b);
        else
            tc_mma_bf16(d, a, b + 2);
        break;
    case 1: // one lane's ldmatrix row 8 bytes off its 16-byte alignment
        tc_ldmatrix_x4(a, &smem[lane * 8 + (lane == 5 ? 4 : 0)]);
        break;
    case 2: // ldmatrix rows past the end of the dynamic shared memory
        tc_ldmatrix_x2(a, &smem[lane * 64]);
        break;
    case 3: // a zero-fill copy whose source lies just past the allocation
        tc_cp_async16(&smem[lane * 8], src + n, 0);
        tc_cp_commit();
        tc_cp_wait<0>();
        break;
    case 4: // the last lane has returned before the mma
        if (lane == 31) return;
        tc_mma_bf16(d, a, b);
        break;
    case 5: // a vector reduction at an address that is 4- but not 8-byte aligned
        tc_red_add2(out + 1, 1.0f, 1.0f);
        break;
    case 6: // rows 128 bytes apart: all in one quad of banks (8 wavefronts)
        tc_ldmatrix_x4(a, &smem[(lane & 7) * 64]);
        break;
    }
    out[lane] = d[0] + __uint_as_float(a[0]);
}

// tc_mma_peak: register-only mma chains, the mma.sync ceiling of a GPU.
// Each warp runs 8 independent accumulator chains (enough to cover the
// tensor pipe's latency) for iters rounds: 2·16·8·16·8·iters FLOPs a warp.
// The operands are small multiples of 1/2 drawn from seed, the warp and the
// lane (tc_peak_value), so every sum is exact in float32 and a test can
// compare the result exactly: out[(warp·32 + lane)·32 + 4c + i] is
// accumulator i of chain c of the warp's lane.
__device__ __forceinline__ u32 tc_peak_value(unsigned seed, unsigned warp, unsigned lane, unsigned slot) {
    unsigned h = seed ^ warp * 0x9e3779b1u ^ lane * 0x85ebca77u ^ slot * 0xc2b2ae3du;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    h *= 0x297a2d39u;
    h ^= h >> 15;
    float v = (float)((int)(h % 7u) - 3) * 0.5f;
    return __float_as_uint(v) >> 16; // exact: a few mantissa bits
}

extern "C" __global__ void __launch_bounds__(256) tc_mma_peak(float* out, int iters, unsigned seed) {
    unsigned warp = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    u32 a[4], b[8][2];
    for (int i = 0; i < 4; i++) a[i] = tc_peak_value(seed, warp, lane, 2 * i) | tc_peak_value(seed, warp, lane, 2 * i + 1) << 16;
    for (int c = 0; c < 8; c++)
        for (int j = 0; j < 2; j++)
            b[c][j] = tc_peak_value(seed, warp, lane, 8 + 4 * c + 2 * j) | tc_peak_value(seed, warp, lane, 8 + 4 * c + 2 * j + 1) << 16;
    float acc[8][4];
#pragma unroll
    for (int c = 0; c < 8; c++) acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.0f;
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int c = 0; c < 8; c++) tc_mma_bf16(acc[c], a, b[c]);
    }
    float* o = out + (size_t)(warp * 32 + lane) * 32;
#pragma unroll
    for (int c = 0; c < 8; c++)
#pragma unroll
        for (int i = 0; i < 4; i++) o[4 * c + i] = acc[c][i];
}
