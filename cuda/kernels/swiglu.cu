// SwiGLU: out = silu(gate) ⊙ up with gu[t] = gate[t, :I] | up[t, I:2I].
// Backward: d gate = dy·up·σ(g)(1 + g(1−σ(g))), d up = dy·silu(g).
#include "common.cuh"

// G is gu's storage and O out's: float, or bf16 for the MLP's activations
// stored in bf16 under mixed precision (widened exactly, the result
// computed in float and rounded once). The backward's gradients are float.
template <typename O, typename G>
__device__ __forceinline__ void swiglu_forward_t(O* out, const G* gu, int rows, int I) {
    long long n = (long long)rows * I;
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
        long long t = k / I;
        int i = (int)(k - t * I);
        float g = load_f(gu, t * 2 * I + i), u = load_f(gu, t * 2 * I + I + i);
        store_f(out, k, g / (1.0f + expf(-g)) * u);
    }
}

extern "C" __global__ void __launch_bounds__(256) swiglu_forward(float* out, const float* gu, int rows, int I) {
    swiglu_forward_t(out, gu, rows, I);
}

extern "C" __global__ void __launch_bounds__(256) swiglu_forward_bf16(bf16* out, const bf16* gu, int rows, int I) {
    swiglu_forward_t(out, gu, rows, I);
}

// D is dgu's storage: float, or bf16 under mixed precision, where dgu's
// only readers are the two matmuls that take it as bf16; each element is
// rounded once from the same float the float32 kernel writes.
template <typename D, typename G>
__device__ __forceinline__ void swiglu_backward_t(D* dgu, const float* dout, const G* gu, int rows, int I) {
    long long n = (long long)rows * I;
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
        long long t = k / I;
        int i = (int)(k - t * I);
        float g = load_f(gu, t * 2 * I + i), u = load_f(gu, t * 2 * I + I + i), dy = dout[k];
        float s = 1.0f / (1.0f + expf(-g));
        store_f(dgu, t * 2 * I + i, dy * u * s * (1.0f + g * (1.0f - s)));
        store_f(dgu, t * 2 * I + I + i, dy * g * s);
    }
}

extern "C" __global__ void __launch_bounds__(256) swiglu_backward(float* dgu, const float* dout, const float* gu, int rows, int I) {
    swiglu_backward_t(dgu, dout, gu, rows, I);
}

extern "C" __global__ void __launch_bounds__(256) swiglu_backward_gubf16(float* dgu, const float* dout, const bf16* gu, int rows, int I) {
    swiglu_backward_t(dgu, dout, gu, rows, I);
}

extern "C" __global__ void __launch_bounds__(256) swiglu_backward_dbf16(bf16* dgu, const float* dout, const float* gu, int rows, int I) {
    swiglu_backward_t(dgu, dout, gu, rows, I);
}

extern "C" __global__ void __launch_bounds__(256) swiglu_backward_gubf16_dbf16(bf16* dgu, const float* dout, const bf16* gu, int rows, int I) {
    swiglu_backward_t(dgu, dout, gu, rows, I);
}
