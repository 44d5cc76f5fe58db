// Token embedding: out[t] = table[ids[t]], and its backward,
// dtable[ids[t]] += dout[t] (atomic: a token may repeat in a batch).
#include "common.cuh"

// One block per token.
extern "C" __global__ void __launch_bounds__(256) embedding_forward(float* out, const int* ids, const float* table, int C) {
    int t = blockIdx.x;
    const float* src = table + (long long)ids[t] * C;
    float* dst = out + (long long)t * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) dst[c] = src[c];
}

extern "C" __global__ void __launch_bounds__(256) embedding_backward(float* dtable, const float* dout, const int* ids, int C) {
    int t = blockIdx.x;
    float* dst = dtable + (long long)ids[t] * C;
    const float* src = dout + (long long)t * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) atomicAdd(dst + c, src[c]);
}
