// RoPE, rotate-half (NeoX) form: for i < HS/2 the pair (x_i, x_{i+HS/2})
// of each head turns by pos·invfreq[i]. As on the CPU, invfreq is rounded
// to float32 (Hugging Face computes it in float32), the angle is formed in
// double and rounded to float32, and the rotation itself runs in double,
// so long contexts lose nothing to float32 trigonometry. A negative
// position turns by the opposite angle of its magnitude's, the sine's sign
// flipped (the backward: the rotation is orthogonal, its transpose is the
// rotation at the negated positions).
#include "common.cuh"

// One thread per (row, head, i < HS/2). X is x's storage: float, or bf16
// for q|k stored in bf16 under mixed precision (widened exactly, rotated in
// double as above, each result rounded once to bf16).
template <typename X>
__device__ __forceinline__ void rope_t(X* x, int ld, int off, const int* pos, const float* invfreq, int T, int nHeads, int HS) {
    int half = HS / 2;
    long long n = (long long)T * nHeads * half;
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
        int i = (int)(k % half);
        long long th = k / half;
        int h = (int)(th % nHeads);
        long long t = th / nHeads;
        int p = pos[t];
        float a = (float)((double)(p < 0 ? -p : p) * (double)invfreq[i]);
        double s, c;
        sincos((double)a, &s, &c);
        if (p < 0) s = -s;
        X* v = x + t * ld + off + (long long)h * HS;
        double x0 = load_f(v, i), x1 = load_f(v, i + half);
        store_f(v, i, (float)(x0 * c - x1 * s));
        store_f(v, i + half, (float)(x1 * c + x0 * s));
    }
}

extern "C" __global__ void __launch_bounds__(256) rope_forward(float* x, int ld, int off, const int* pos, const float* invfreq, int T, int nHeads, int HS) {
    rope_t(x, ld, off, pos, invfreq, T, nHeads, HS);
}

extern "C" __global__ void __launch_bounds__(256) rope_forward_bf16(bf16* x, int ld, int off, const int* pos, const float* invfreq, int T, int nHeads,
                                                                    int HS) {
    rope_t(x, ld, off, pos, invfreq, T, nHeads, HS);
}
