// Residual add: out = a + b elementwise; out may alias a or b.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256) residual_forward(float* out, const float* a, const float* b, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        out[i] = a[i] + b[i];
    }
}
