// Residual add: out = a + b elementwise; out may alias a or b. The sum is
// taken in float; O, A and B are the storages (residual_forward_bf16: the
// residual stream in bf16 under mixed precision, a branch output in float,
// the sum rounded to bf16 once).
#include "common.cuh"

template <typename O, typename A, typename B>
__device__ __forceinline__ void residual_forward_t(O* out, const A* a, const B* b, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        store_f(out, i, load_f(a, i) + load_f(b, i));
    }
}

extern "C" __global__ void __launch_bounds__(256) residual_forward(float* out, const float* a, const float* b, long long n) {
    residual_forward_t(out, a, b, n);
}

extern "C" __global__ void __launch_bounds__(256) residual_forward_bf16(bf16* out, const bf16* a, const float* b, long long n) {
    residual_forward_t(out, a, b, n);
}
