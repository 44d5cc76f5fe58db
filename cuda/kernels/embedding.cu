// Token embedding: out[t] = table[ids[t]], and its backward,
// dtable[ids[t]] += dout[t] (atomic: a token may repeat in a batch).
#include "common.cuh"

// One block per token. T is the table's storage and O the output's: float,
// or bf16 for a frozen model's table stored in bf16 (widened exactly) and
// for an output on the residual stream stored in bf16 under mixed
// precision (rounded to nearest even).
template <typename T, typename O>
__device__ __forceinline__ void embedding_forward_t(O* out, const int* ids, const T* table, int C) {
    int t = blockIdx.x;
    const T* src = table + (long long)ids[t] * C;
    O* dst = out + (long long)t * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) store_f(dst, c, load_f(src, c));
}

extern "C" __global__ void __launch_bounds__(256) embedding_forward(float* out, const int* ids, const float* table, int C) {
    embedding_forward_t(out, ids, table, C);
}

extern "C" __global__ void __launch_bounds__(256) embedding_forward_bf16(float* out, const int* ids, const bf16* table, int C) {
    embedding_forward_t(out, ids, table, C);
}

extern "C" __global__ void __launch_bounds__(256) embedding_forward_obf16(bf16* out, const int* ids, const float* table, int C) {
    embedding_forward_t(out, ids, table, C);
}

extern "C" __global__ void __launch_bounds__(256) embedding_forward_bf16_obf16(bf16* out, const int* ids, const bf16* table, int C) {
    embedding_forward_t(out, ids, table, C);
}

// embedding_backward: dtable[row] += dout[t] for every position t of the
// row, one block a distinct row, the positions added in order (as the CPU
// device adds them) and without atomics, so that two runs give the same
// bits. groups holds the U distinct rows, then U+1 offsets into the
// positions that follow, then the positions grouped by row, ascending
// within a row (EmbeddingBackward builds it on the host).
extern "C" __global__ void __launch_bounds__(256) embedding_backward(float* dtable, const float* dout, const int* groups, int U, int C) {
    int u = blockIdx.x;
    const int* start = groups + U;
    const int* pos = groups + 2 * U + 1;
    float* dst = dtable + (long long)groups[u] * C;
    int s = start[u], e = start[u + 1];
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float a = dst[c];
        for (int j = s; j < e; j++) a += dout[(long long)pos[j] * C + c];
        dst[c] = a;
    }
}
