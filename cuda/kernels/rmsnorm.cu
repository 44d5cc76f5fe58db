// RMSNorm as Qwen2 computes it in float32: n = x·r with
// r = 1/sqrt(mean(x²) + eps), y = n ⊙ w; r is saved per row.
// Backward: dx = r·(w⊙dy − n·mean(n⊙w⊙dy)), dw += Σ_rows dy⊙n.
// The residual adds beside the norm fuse in: forward sum = a + b before
// the norm of sum, backward dx = resid + dx after it.
#include "common.cuh"

// One block per row. X is the input's storage and W the weight's: float,
// or bf16 for an input on the residual stream stored in bf16 under mixed
// precision (AllocCompute) and for a frozen model's weight stored in bf16;
// bf16 values widen exactly as read, and the sum of squares accumulates in
// float either way. O is the output's storage: float, or bf16 for a norm
// output stored in bf16 under mixed precision (the matmul input the layer
// saves for its backward), rounded once from the float product.
template <typename O, typename X, typename W>
__device__ __forceinline__ void rmsnorm_forward_t(O* out, float* rstd, const X* inp, const W* w, int rows, int C, float eps) {
    __shared__ float scratch[32];
    int t = blockIdx.x;
    const X* x = inp + (long long)t * C;
    float ss = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) ss += load_f(x, c) * load_f(x, c);
    ss = block_sum(ss, scratch);
    float r = 1.0f / sqrtf(ss / (float)C + eps);
    if (threadIdx.x == 0) rstd[t] = r;
    O* y = out + (long long)t * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) store_f(y, c, (load_f(x, c) * r) * load_f(w, c));
}

extern "C" __global__ void __launch_bounds__(1024) rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int rows, int C, float eps) {
    rmsnorm_forward_t(out, rstd, inp, w, rows, C, eps);
}

extern "C" __global__ void __launch_bounds__(1024) rmsnorm_forward_wbf16(float* out, float* rstd, const float* inp, const bf16* w, int rows, int C,
                                                                         float eps) {
    rmsnorm_forward_t(out, rstd, inp, w, rows, C, eps);
}

extern "C" __global__ void __launch_bounds__(1024) rmsnorm_forward_xbf16(float* out, float* rstd, const bf16* inp, const float* w, int rows, int C,
                                                                         float eps) {
    rmsnorm_forward_t(out, rstd, inp, w, rows, C, eps);
}

extern "C" __global__ void __launch_bounds__(1024) rmsnorm_forward_xbf16_wbf16(float* out, float* rstd, const bf16* inp, const bf16* w, int rows,
                                                                               int C, float eps) {
    rmsnorm_forward_t(out, rstd, inp, w, rows, C, eps);
}

// bf16 outputs (per-layer norm outputs in bf16 under mixed precision) over
// the bf16 residual stream.
extern "C" __global__ void __launch_bounds__(1024) rmsnorm_forward_xbf16_obf16(bf16* out, float* rstd, const bf16* inp, const float* w, int rows,
                                                                               int C, float eps) {
    rmsnorm_forward_t(out, rstd, inp, w, rows, C, eps);
}

extern "C" __global__ void __launch_bounds__(1024) rmsnorm_forward_xbf16_wbf16_obf16(bf16* out, float* rstd, const bf16* inp, const bf16* w,
                                                                                     int rows, int C, float eps) {
    rmsnorm_forward_t(out, rstd, inp, w, rows, C, eps);
}

// The residual add fused with the RMSNorm after it (RMSNorm's resid): each
// thread writes its elements of sum = a + b (taken in float, rounded once
// into S), then the norm runs over the row as stored, read back by the
// thread that wrote it: the bits of Add then RMSNorm, without the sum's
// second trip through memory. S is the residual stream's storage (a's
// and out's too), b a float32 branch output, W the weight's storage.
template <typename S, typename W>
__device__ __forceinline__ void add_rmsnorm_forward_t(S* sum, S* out, float* rstd, const S* a, const float* b, const W* w, int rows, int C,
                                                      float eps) {
    long long o = (long long)blockIdx.x * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) store_f(sum, o + c, load_f(a, o + c) + b[o + c]);
    rmsnorm_forward_t(out, rstd, (const S*)sum, w, rows, C, eps);
}

extern "C" __global__ void __launch_bounds__(1024) add_rmsnorm_forward(float* sum, float* out, float* rstd, const float* a, const float* b,
                                                                       const float* w, int rows, int C, float eps) {
    add_rmsnorm_forward_t(sum, out, rstd, a, b, w, rows, C, eps);
}

extern "C" __global__ void __launch_bounds__(1024) add_rmsnorm_forward_wbf16(float* sum, float* out, float* rstd, const float* a, const float* b,
                                                                             const bf16* w, int rows, int C, float eps) {
    add_rmsnorm_forward_t(sum, out, rstd, a, b, w, rows, C, eps);
}

extern "C" __global__ void __launch_bounds__(1024) add_rmsnorm_forward_sbf16(bf16* sum, bf16* out, float* rstd, const bf16* a, const float* b,
                                                                             const float* w, int rows, int C, float eps) {
    add_rmsnorm_forward_t(sum, out, rstd, a, b, w, rows, C, eps);
}

extern "C" __global__ void __launch_bounds__(1024) add_rmsnorm_forward_sbf16_wbf16(bf16* sum, bf16* out, float* rstd, const bf16* a,
                                                                                   const float* b, const bf16* w, int rows, int C, float eps) {
    add_rmsnorm_forward_t(sum, out, rstd, a, b, w, rows, C, eps);
}

// rms_add_rn is a + b rounded once: never contracted with the product
// that made b into one fused multiply-add, so a fused kernel's sum is the
// bits of the unfused kernels' (the norm writes b, the residual add reads it).
__device__ __forceinline__ float rms_add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

// A grid of G blocks strides over the rows; each block keeps its share of
// dw in shared memory (C floats, dynamic) and writes it at the end into
// its own row of dwpart[G, C] (none for a null dwpart: a frozen weight);
// rmsnorm_dw_sum then adds the G rows into dw in block order. Atomic adds
// into dw would give another sum each run, as blocks finish in another
// order; this way two runs of a step give the same bits. X is the input's
// storage, as in the forward (rmsnorm_backward_xbf16). With resid set the
// residual gradient it holds is added to the input gradient (dinp =
// resid + dnorm; resid may be dinp itself), and with dxc set the result
// is written there too in its storage D (bf16: the copy that mixed
// precision's matmuls read, rounded once here instead of once per matmul).
template <typename X, typename D>
__device__ __forceinline__ void rmsnorm_backward_t(float* dinp, D* dxc, float* dwpart, const float* dout, const X* inp, const float* w,
                                                   const float* rstd, const float* resid, int rows, int C) {
    extern __shared__ float acc[];
    __shared__ float scratch[32];
    for (int c = threadIdx.x; c < C; c += blockDim.x) acc[c] = 0.0f;
    for (int t = blockIdx.x; t < rows; t += gridDim.x) {
        const X* x = inp + (long long)t * C;
        const float* dy = dout + (long long)t * C;
        float r = rstd[t];
        float dot = 0.0f;
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            float n = load_f(x, c) * r;
            dot += n * (w[c] * dy[c]);
            acc[c] += dy[c] * n;
        }
        dot = block_sum(dot, scratch) / (float)C;
        long long o = (long long)t * C;
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            float n = load_f(x, c) * r;
            float v = r * (w[c] * dy[c] - n * dot);
            if (resid) v = rms_add_rn(resid[o + c], v);
            dinp[o + c] = v;
            if (dxc) store_f(dxc, o + c, v);
        }
    }
    if (!dwpart) return; // a frozen weight: only the input gradient is wanted
    __syncthreads();
    float* part = dwpart + (long long)blockIdx.x * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) part[c] = acc[c];
}

// rmsnorm_dw_sum adds the backward's per-block rows part[G, C] into dw, in
// block order: one thread a column.
extern "C" __global__ void __launch_bounds__(256) rmsnorm_dw_sum(float* dw, const float* part, int G, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float s = 0.0f;
    for (int g = 0; g < G; g++) s += part[(long long)g * C + c];
    dw[c] += s;
}

extern "C" __global__ void __launch_bounds__(1024) rmsnorm_backward(float* dinp, float* dwpart, const float* dout, const float* inp, const float* w, const float* rstd, int rows, int C) {
    rmsnorm_backward_t(dinp, (float*)nullptr, dwpart, dout, inp, w, rstd, nullptr, rows, C);
}

extern "C" __global__ void __launch_bounds__(1024) rmsnorm_backward_xbf16(float* dinp, float* dwpart, const float* dout, const bf16* inp, const float* w,
                                                                          const float* rstd, int rows, int C) {
    rmsnorm_backward_t(dinp, (float*)nullptr, dwpart, dout, inp, w, rstd, nullptr, rows, C);
}

// The backward fused with the residual add after it (RMSNormBackward's resid):
// dx = resid + dnorm, and dx's copy in dxc's storage when dxc is set.
extern "C" __global__ void __launch_bounds__(1024) rmsnorm_backward_add(float* dx, float* dxc, float* dwpart, const float* dout, const float* inp,
                                                                        const float* w, const float* rstd, const float* resid, int rows, int C) {
    rmsnorm_backward_t(dx, dxc, dwpart, dout, inp, w, rstd, resid, rows, C);
}

extern "C" __global__ void __launch_bounds__(1024) rmsnorm_backward_add_xbf16(float* dx, float* dxc, float* dwpart, const float* dout, const bf16* inp,
                                                                              const float* w, const float* rstd, const float* resid, int rows, int C) {
    rmsnorm_backward_t(dx, dxc, dwpart, dout, inp, w, rstd, resid, rows, C);
}

extern "C" __global__ void __launch_bounds__(1024) rmsnorm_backward_add_dbf16(float* dx, bf16* dxc, float* dwpart, const float* dout, const float* inp,
                                                                              const float* w, const float* rstd, const float* resid, int rows, int C) {
    rmsnorm_backward_t(dx, dxc, dwpart, dout, inp, w, rstd, resid, rows, C);
}

extern "C" __global__ void __launch_bounds__(1024) rmsnorm_backward_add_xbf16_dbf16(float* dx, bf16* dxc, float* dwpart, const float* dout,
                                                                                    const bf16* inp, const float* w, const float* rstd,
                                                                                    const float* resid, int rows, int C) {
    rmsnorm_backward_t(dx, dxc, dwpart, dout, inp, w, rstd, resid, rows, C);
}
