// SwiGLU: out = silu(gate) ⊙ up with gu[t] = gate[t, :I] | up[t, I:2I].
// Backward: d gate = dy·up·σ(g)(1 + g(1−σ(g))), d up = dy·silu(g).
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256) swiglu_forward(float* out, const float* gu, int rows, int I) {
    long long n = (long long)rows * I;
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
        long long t = k / I;
        int i = (int)(k - t * I);
        float g = gu[t * 2 * I + i], u = gu[t * 2 * I + I + i];
        out[k] = g / (1.0f + expf(-g)) * u;
    }
}

extern "C" __global__ void __launch_bounds__(256) swiglu_backward(float* dgu, const float* dout, const float* gu, int rows, int I) {
    long long n = (long long)rows * I;
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
        long long t = k / I;
        int i = (int)(k - t * I);
        float g = gu[t * 2 * I + i], u = gu[t * 2 * I + I + i], dy = dout[k];
        float s = 1.0f / (1.0f + expf(-g));
        dgu[t * 2 * I + i] = dy * u * s * (1.0f + g * (1.0f - s));
        dgu[t * 2 * I + I + i] = dy * g * s;
    }
}
