// Token embedding: out[t] = table[ids[t]], and its backward,
// dtable[ids[t]] += dout[t] (atomic: a token may repeat in a batch).
#include "common.cuh"

// One block per token. T is the table's storage: float, or bf16 for a
// frozen model stored in bf16 (embedding_forward_bf16, widened exactly).
template <typename T>
__device__ __forceinline__ void embedding_forward_t(float* out, const int* ids, const T* table, int C) {
    int t = blockIdx.x;
    const T* src = table + (long long)ids[t] * C;
    float* dst = out + (long long)t * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) dst[c] = load_f(src, c);
}

extern "C" __global__ void __launch_bounds__(256) embedding_forward(float* out, const int* ids, const float* table, int C) {
    embedding_forward_t(out, ids, table, C);
}

extern "C" __global__ void __launch_bounds__(256) embedding_forward_bf16(float* out, const int* ids, const bf16* table, int C) {
    embedding_forward_t(out, ids, table, C);
}

extern "C" __global__ void __launch_bounds__(256) embedding_backward(float* dtable, const float* dout, const int* ids, int C) {
    int t = blockIdx.x;
    float* dst = dtable + (long long)ids[t] * C;
    const float* src = dout + (long long)t * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) atomicAdd(dst + c, src[c]);
}
