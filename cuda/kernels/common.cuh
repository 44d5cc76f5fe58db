// Shared helpers of the r1go kernels. NVRTC compiles these without any CUDA
// toolkit header, so bf16 is handled as raw 16-bit patterns here instead of
// through cuda_bf16.h.
#pragma once

typedef unsigned short bf16;

// bf16 → float: a bf16 is the top half of a float32.
__device__ __forceinline__ float bf16_to_float(bf16 h) {
    return __uint_as_float(((unsigned int)h) << 16);
}

// float → bf16 with round-to-nearest-even; NaN stays a (quiet) NaN.
__device__ __forceinline__ bf16 float_to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (bf16)((u >> 16) | 0x0040u);
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16)(u >> 16);
}

// load_f widens element i of a float or bf16 array: kernels templated on
// their storage type read both with one body.
__device__ __forceinline__ float load_f(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float load_f(const bf16* p, long long i) { return bf16_to_float(p[i]); }

// store_f writes a float into a float array, or rounds it into a bf16 one.
__device__ __forceinline__ void store_f(float* p, long long i, float x) { p[i] = x; }
__device__ __forceinline__ void store_f(bf16* p, long long i, float x) { p[i] = float_to_bf16(x); }

// mix64 is splitmix64's finaliser: a well-spread hash of x (the samplers'
// random numbers, the stochastic rounding of bf16 AdamW moments).
__device__ __forceinline__ unsigned long long mix64(unsigned long long x) {
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27; x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

#define NEG_INF (__int_as_float(0xff800000))

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// block_sum returns the sum of v over the block to every thread. scratch
// holds at least 32 floats; blockDim.x is a multiple of 32.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < nw ? scratch[lane] : 0.0f;
    return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < nw ? scratch[lane] : NEG_INF;
    return warp_max(v);
}

__device__ __forceinline__ double block_sum_d(double v, double* scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum_d(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < nw ? scratch[lane] : 0.0;
    return warp_sum_d(v);
}
