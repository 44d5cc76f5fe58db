// float32 ↔ bf16 conversion of whole buffers (round-to-nearest-even, NaN
// kept): the bridge between fp32 master weights and bf16 compute copies.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256) convert_f32_bf16(bf16* out, const float* in, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        out[i] = float_to_bf16(in[i]);
    }
}

extern "C" __global__ void __launch_bounds__(256) convert_bf16_f32(float* out, const bf16* in, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        out[i] = bf16_to_float(in[i]);
    }
}

// round_bf16 rounds float32 values in place to the nearest bf16 (kept as
// float32): an activation stored as bf16, where the op that wrote it has
// no bf16 output.
extern "C" __global__ void __launch_bounds__(256) round_bf16(float* x, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        x[i] = bf16_to_float(float_to_bf16(x[i]));
    }
}
