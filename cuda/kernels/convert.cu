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
