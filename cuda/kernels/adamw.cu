// AdamW over a flat buffer (decoupled weight decay, Loshchilov & Hutter):
// g ← g·gscale, m ← β1·m + (1−β1)·g, v ← β2·v + (1−β2)·g²,
// p ← p − lr·((m/c1)/(√(v/c2)+eps) + wd·p) with c1 = 1−β1^t, c2 = 1−β2^t
// (computed on the host in double). And Σx² for gradient-norm clipping.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256) adamw_update(float* p, const float* g, float* m, float* v, long long n,
                                        float lr, float beta1, float beta2, float eps, float wd,
                                        float c1, float c2, float gscale) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float gi = g[i] * gscale;
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float pi = p[i];
        p[i] = pi - lr * ((mi / c1) / (sqrtf(vi / c2) + eps) + wd * pi);
    }
}

// Each thread sums squares in double over a grid stride; each block
// reduces its threads' sums and writes out[blockIdx.x], which the launcher
// adds in block order (an atomic add across blocks would round in the
// order blocks finish, another sum each run). Double keeps the clipping
// norm of billions of parameters exact enough to match the CPU's float64
// sum.
extern "C" __global__ void __launch_bounds__(256) sum_squares(double* out, const float* x, long long n) {
    __shared__ double part[32];
    double s = 0.0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        double v = x[i];
        s += v * v;
    }
    s = warp_sum_d(s);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0;
        s = warp_sum_d(s);
        if (lane == 0) out[blockIdx.x] = s;
    }
}

// adamw_update with a bf16 compute copy: the same fp32 update of the master
// weights p and the moments, then the new weight rounded (nearest even)
// into pb, so the next forward pass reads bf16 weights without a separate
// conversion pass over the parameters.
extern "C" __global__ void __launch_bounds__(256) adamw_update_bf16(float* p, bf16* pb, const float* g, float* m, float* v, long long n,
                                        float lr, float beta1, float beta2, float eps, float wd,
                                        float c1, float c2, float gscale) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float gi = g[i] * gscale;
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float pi = p[i];
        float np = pi - lr * ((mi / c1) / (sqrtf(vi / c2) + eps) + wd * pi);
        p[i] = np;
        pb[i] = float_to_bf16(np);
    }
}

// float_to_bf16_stochastic rounds f to one of its two bf16 neighbours with
// the probability that makes the result unbiased; r supplies 16 random
// bits. Moments stored as bf16 need it: with round-to-nearest an update
// smaller than half a bf16 step would never change the stored value.
__device__ __forceinline__ bf16 float_to_bf16_stochastic(float f, unsigned int r) {
    unsigned int b = __float_as_uint(f);
    if ((b & 0x7fffffffu) >= 0x7f800000u) return float_to_bf16(f);
    b += r & 0xffffu;
    return (bf16)(b >> 16);
}

// adamw_update with both moments stored as bf16 (optim state_dtype
// bfloat16), the CPU device's adamWBF16 step for step: the update in double
// from the widened moments, each moment rounded stochastically with random
// bits that hash the step's seed and the element index (so a run is
// reproducible and every element draws independently), the master weight
// rounded to float. pb, when not null, is the weights' bf16 compute copy,
// written in the same pass as adamw_update_bf16 does.
extern "C" __global__ void __launch_bounds__(256) adamw_update_mbf16(float* p, bf16* pb, const float* g, bf16* m, bf16* v, long long n,
                                                                     double lr, double beta1, double beta2, double eps, double wd,
                                                                     double c1, double c2, double gscale, unsigned long long seed) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        double gi = (double)g[i] * gscale;
        double mi = beta1 * (double)bf16_to_float(m[i]) + (1.0 - beta1) * gi;
        double vi = beta2 * (double)bf16_to_float(v[i]) + (1.0 - beta2) * gi * gi;
        unsigned long long r = mix64(seed ^ (unsigned long long)i);
        m[i] = float_to_bf16_stochastic((float)mi, (unsigned int)r);
        v[i] = float_to_bf16_stochastic((float)vi, (unsigned int)(r >> 32));
        double pi = (double)p[i];
        float np = (float)(pi - lr * ((mi / c1) / (sqrt(vi / c2) + eps) + wd * pi));
        p[i] = np;
        if (pb != 0) pb[i] = float_to_bf16(np);
    }
}
