// RoPE, rotate-half (NeoX) form: for i < HS/2 the pair (x_i, x_{i+HS/2})
// of each head turns by pos·invfreq[i]. As on the CPU, invfreq is rounded
// to float32 (Hugging Face computes it in float32), the angle is formed in
// double and rounded to float32, and the rotation itself runs in double,
// so long contexts lose nothing to float32 trigonometry. sign = −1 rotates
// back (the backward: the rotation is orthogonal).
#include "common.cuh"

// One thread per (row, head, i < HS/2).
extern "C" __global__ void __launch_bounds__(256) rope_forward(float* x, int ld, int off, const int* pos, const float* invfreq, int T, int nHeads, int HS, float sign) {
    int half = HS / 2;
    long long n = (long long)T * nHeads * half;
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
        int i = (int)(k % half);
        long long th = k / half;
        int h = (int)(th % nHeads);
        long long t = th / nHeads;
        float a = (float)((double)pos[t] * (double)invfreq[i]);
        double s, c;
        sincos((double)a, &s, &c);
        s *= (double)sign;
        float* v = x + t * ld + off + (long long)h * HS;
        double x0 = v[i], x1 = v[i + half];
        v[i] = (float)(x0 * c - x1 * s);
        v[i + half] = (float)(x1 * c + x0 * s);
    }
}
