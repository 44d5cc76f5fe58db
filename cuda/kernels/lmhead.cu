// The fused LM head, in vocabulary chunks. The launcher multiplies a block
// of hidden rows by a chunk of the vocabulary (cuBLAS) into z[n, m]; these
// kernels fold each chunk into running per-row statistics (max, Σe^(z−max),
// Σe^(z−max)·z, the target's logit), kept in double, so [T, V] logits never
// exist at once. lse = log Σe^z, logprob = z_y − lse, entropy = lse − E_p[z].
// Backward, per logit: d logprob/dz_v = 1[v=y] − p_v and
// dH/dz_v = −p_v·(z_v − E_p[z]), with p_v = e^(z_v − lse) and E_p[z] = lse − H.
#include "common.cuh"

// One block per row of the chunk. first marks the chunk at v0 = 0, which
// starts the statistics instead of updating them. targets and the
// statistics arrays start at the block's first row.
extern "C" __global__ void __launch_bounds__(256) lmhead_stats(const float* z, int m, int v0, const int* targets,
                                        double* mx, double* se, double* sz, double* zy, int first) {
    __shared__ float fscratch[32];
    __shared__ double dscratch[32];
    int i = blockIdx.x;
    const float* row = z + (long long)i * m;
    float cm = NEG_INF;
    for (int c = threadIdx.x; c < m; c += blockDim.x) cm = fmaxf(cm, row[c]);
    cm = block_max(cm, fscratch);
    double om = first ? (double)NEG_INF : mx[i];
    double nm = fmax(om, (double)cm);
    float nmf = (float)nm;
    double s = 0.0, sv = 0.0;
    for (int c = threadIdx.x; c < m; c += blockDim.x) {
        double e = (double)expf(row[c] - nmf);
        s += e;
        sv += e * (double)row[c];
    }
    s = block_sum_d(s, dscratch);
    sv = block_sum_d(sv, dscratch);
    if (threadIdx.x == 0) {
        // nm was rounded to float for the exponentials above; fold that
        // rounding into the scale of this chunk's sums.
        double shift = exp((double)nmf - nm);
        s *= shift;
        sv *= shift;
        if (first) {
            se[i] = s;
            sz[i] = sv;
            zy[i] = 0.0;
        } else {
            double r = exp(om - nm);
            se[i] = se[i] * r + s;
            sz[i] = sz[i] * r + sv;
        }
        mx[i] = nm;
        int y = targets[i] - v0;
        if (y >= 0 && y < m) zy[i] = row[y];
    }
}

// One thread per row.
extern "C" __global__ void __launch_bounds__(256) lmhead_finish(float* logprob, float* entropy, float* lse, const double* mx, const double* se,
                                         const double* sz, const double* zy, const int* targets, int T) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    double l = mx[t] + log(se[t]);
    lse[t] = (float)l;
    entropy[t] = (float)(l - sz[t] / se[t]);
    logprob[t] = targets[t] >= 0 ? (float)(zy[t] - l) : 0.0f;
}

// lmhead_grad_value is d(loss)/dz for one logit zv of a row with
// log-normaliser l, mean logit ez = E_p[z], upstream gradients gl (logprob)
// and ge (entropy); hit marks the target. One body for the float32 and the
// bf16 kernels, so both compute the same float before the bf16 one rounds.
__device__ __forceinline__ float lmhead_grad_value(float zv, float l, float ez, float gl, float ge, bool hit) {
    float p = expf(zv - l);
    float g = -gl * p - ge * p * (zv - ez);
    if (hit) g += gl;
    return g;
}

// Turns the logits z[n, m] of a chunk into d(loss)/dz in place. targets and
// the per-row inputs start at the block's first row.
extern "C" __global__ void __launch_bounds__(256) lmhead_grad(float* z, int n, int m, int v0, const int* targets, const float* lse,
                                       const float* entropy, const float* dlogprob, const float* dentropy) {
    long long total = (long long)n * m;
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < total; k += (long long)gridDim.x * blockDim.x) {
        int i = (int)(k / m);
        int v = (int)(k - (long long)i * m);
        int y = targets[i];
        float gl = y < 0 ? 0.0f : dlogprob[i];
        z[k] = lmhead_grad_value(z[k], lse[i], lse[i] - entropy[i], gl, dentropy[i], v == y - v0);
    }
}

// lmhead_grad_bf16 is lmhead_grad writing d(loss)/dz rounded to bf16 into
// g[n, m] instead of over z: the mixed-precision backward's two matmuls
// read it as it is, so the chunk's gradient is rounded once, here, and
// the float32 gradient is never written.
extern "C" __global__ void __launch_bounds__(256) lmhead_grad_bf16(bf16* g, const float* z, int n, int m, int v0, const int* targets,
                                            const float* lse, const float* entropy, const float* dlogprob, const float* dentropy) {
    long long total = (long long)n * m;
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < total; k += (long long)gridDim.x * blockDim.x) {
        int i = (int)(k / m);
        int v = (int)(k - (long long)i * m);
        int y = targets[i];
        float gl = y < 0 ? 0.0f : dlogprob[i];
        g[k] = float_to_bf16(lmhead_grad_value(z[k], lse[i], lse[i] - entropy[i], gl, dentropy[i], v == y - v0));
    }
}
