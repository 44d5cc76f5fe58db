// Causal grouped-query attention over packed sequences, flash-attention
// style: the forward keeps only the log-normaliser of each softmax row and
// the backward recomputes the probabilities from it, so no [T, T] matrix is
// ever stored. Query head h reads key-value head h / (NH/KVH).
//
// A block owns a tile of up to BQ query rows of one sequence and one head;
// each warp owns one row. Keys and values stream through shared memory BK
// rows at a time; in a tile, lane j scores key j, then every lane updates
// the output columns d = lane + 32·i it owns (an online softmax).
//
// Tiles (int4, built on the host): x = first query row, y = rows, z = first
// key row in k/v, w = keys the first row sees (row r sees w + r keys). The
// same kernel serves the KV cache: there k/v are the cache and z the slot's
// first row.
#include "common.cuh"

#define BQ 8
#define BK 32
#define MAXD 8  // head size ≤ 32·MAXD = 256

// KV is the storage of k and v: float, or bf16 for a KV cache stored in
// bf16 under mixed precision (attention_forward_kvbf16); Q is q's and O
// out's: float, or bf16 for qkv and the output stored in bf16 under mixed
// precision (attention_forward_bf16: q|k|v read widened, the output
// rounded once). Scores, softmax and the output accumulate in float.
template <typename O, typename Q, typename KV>
__device__ __forceinline__ void attention_forward_t(O* out, float* lse, const Q* q, const KV* k, const KV* v,
                                                    const int4* tiles, int ldq, int ldkv, int ldo, int T, int NH, int KVH,
                                                    int HS, float scale) {
    extern __shared__ float smem[];
    int HSP = HS + 1;  // padded rows: lane j reading row j hits distinct banks
    float* Ks = smem;
    float* Vs = Ks + BK * HSP;
    float* Qs = Vs + BK * HSP;
    int4 tile = tiles[blockIdx.x];
    int h = blockIdx.y, kvh = h / (NH / KVH);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    bool active = warp < tile.y;
    int tq = tile.x + warp;
    int nk = tile.w + warp;
    int nkAll = tile.w + tile.y - 1;
    if (active) {
        for (int d = lane; d < HS; d += 32) Qs[warp * HS + d] = load_f(q, (long long)tq * ldq + h * HS + d);
    }
    float m = NEG_INF, l = 0.0f, acc[MAXD];
#pragma unroll
    for (int i = 0; i < MAXD; i++) acc[i] = 0.0f;
    for (int j0 = 0; j0 < nkAll; j0 += BK) {
        int nt = min(BK, nkAll - j0);
        __syncthreads();
        for (int e = threadIdx.x; e < nt * HS; e += blockDim.x) {
            int r = e / HS, d = e - r * HS;
            long long src = (long long)(tile.z + j0 + r) * ldkv + kvh * HS + d;
            Ks[r * HSP + d] = load_f(k, src);
            Vs[r * HSP + d] = load_f(v, src);
        }
        __syncthreads();
        if (!active || j0 >= nk) continue;
        float s = NEG_INF;
        if (lane < nt && j0 + lane < nk) {
            float dot = 0.0f;
            for (int d = 0; d < HS; d++) dot += Qs[warp * HS + d] * Ks[lane * HSP + d];
            s = dot * scale;
        }
        float mn = fmaxf(m, warp_max(s));
        float corr = expf(m - mn);
        float p = s == NEG_INF ? 0.0f : expf(s - mn);
        l = l * corr + warp_sum(p);
        int nv = min(nt, nk - j0);
#pragma unroll
        for (int i = 0; i < MAXD; i++) acc[i] *= corr;
        for (int j = 0; j < nv; j++) {
            float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
            for (int i = 0; i < MAXD; i++) {
                int d = lane + 32 * i;
                if (d < HS) acc[i] += pj * Vs[j * HSP + d];
            }
        }
        m = mn;
    }
    if (active) {
        float inv = 1.0f / l;
#pragma unroll
        for (int i = 0; i < MAXD; i++) {
            int d = lane + 32 * i;
            if (d < HS) store_f(out, (long long)tq * ldo + h * HS + d, acc[i] * inv);
        }
        if (lse != 0 && lane == 0) lse[(long long)h * T + tq] = m + logf(l);
    }
}

extern "C" __global__ void __launch_bounds__(256) attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                                             const int4* tiles, int ldq, int ldkv, int ldo, int T, int NH, int KVH,
                                             int HS, float scale) {
    attention_forward_t(out, lse, q, k, v, tiles, ldq, ldkv, ldo, T, NH, KVH, HS, scale);
}

extern "C" __global__ void __launch_bounds__(256) attention_forward_kvbf16(float* out, float* lse, const float* q, const bf16* k,
                                                    const bf16* v, const int4* tiles, int ldq, int ldkv, int ldo, int T,
                                                    int NH, int KVH, int HS, float scale) {
    attention_forward_t(out, lse, q, k, v, tiles, ldq, ldkv, ldo, T, NH, KVH, HS, scale);
}

extern "C" __global__ void __launch_bounds__(256) attention_forward_bf16(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                                                                         const int4* tiles, int ldq, int ldkv, int ldo, int T, int NH,
                                                                         int KVH, int HS, float scale) {
    attention_forward_t(out, lse, q, k, v, tiles, ldq, ldkv, ldo, T, NH, KVH, HS, scale);
}

// dQ = dS·K with dS = P ⊙ (dO·Vᵀ − D)·scale, P = e^(S − lse) and
// D = rowsum(dO ⊙ O), which this kernel also stores for attention_backward_dkv.
// Same tiles and layout as the forward. Q is the storage of q|k|v and O
// of out, as in the forward; the gradients are float.
template <typename Q, typename O>
__device__ __forceinline__ void attention_backward_dq_t(float* dq, float* Dbuf, const float* dout, const O* out,
                                                 const float* lse, const Q* q, const Q* k, const Q* v,
                                                 const int4* tiles, int ldq, int ldkv, int ldo, int lddq, int T,
                                                 int NH, int KVH, int HS, float scale) {
    extern __shared__ float smem[];
    int HSP = HS + 1;
    float* Ks = smem;
    float* Vs = Ks + BK * HSP;
    float* Qs = Vs + BK * HSP;
    float* dOs = Qs + BQ * HS;
    int4 tile = tiles[blockIdx.x];
    int h = blockIdx.y, kvh = h / (NH / KVH);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    bool active = warp < tile.y;
    int tq = tile.x + warp;
    int nk = tile.w + warp;
    int nkAll = tile.w + tile.y - 1;
    float D = 0.0f, lt = 0.0f;
    if (active) {
        float part = 0.0f;
        for (int d = lane; d < HS; d += 32) {
            long long o = (long long)tq * ldo + h * HS + d;
            Qs[warp * HS + d] = load_f(q, (long long)tq * ldq + h * HS + d);
            dOs[warp * HS + d] = dout[o];
            part += dout[o] * load_f(out, o);
        }
        D = warp_sum(part);
        lt = lse[(long long)h * T + tq];
        if (lane == 0) Dbuf[(long long)h * T + tq] = D;
    }
    float acc[MAXD];
#pragma unroll
    for (int i = 0; i < MAXD; i++) acc[i] = 0.0f;
    for (int j0 = 0; j0 < nkAll; j0 += BK) {
        int nt = min(BK, nkAll - j0);
        __syncthreads();
        for (int e = threadIdx.x; e < nt * HS; e += blockDim.x) {
            int r = e / HS, d = e - r * HS;
            long long src = (long long)(tile.z + j0 + r) * ldkv + kvh * HS + d;
            Ks[r * HSP + d] = load_f(k, src);
            Vs[r * HSP + d] = load_f(v, src);
        }
        __syncthreads();
        if (!active || j0 >= nk) continue;
        float ds = 0.0f;
        if (lane < nt && j0 + lane < nk) {
            float s = 0.0f, dp = 0.0f;
            for (int d = 0; d < HS; d++) {
                s += Qs[warp * HS + d] * Ks[lane * HSP + d];
                dp += dOs[warp * HS + d] * Vs[lane * HSP + d];
            }
            float p = expf(s * scale - lt);
            ds = p * (dp - D) * scale;
        }
        int nv = min(nt, nk - j0);
        for (int j = 0; j < nv; j++) {
            float dsj = __shfl_sync(0xffffffffu, ds, j);
#pragma unroll
            for (int i = 0; i < MAXD; i++) {
                int d = lane + 32 * i;
                if (d < HS) acc[i] += dsj * Ks[j * HSP + d];
            }
        }
    }
    if (active) {
#pragma unroll
        for (int i = 0; i < MAXD; i++) {
            int d = lane + 32 * i;
            if (d < HS) dq[(long long)tq * lddq + h * HS + d] = acc[i];
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dq(float* dq, float* Dbuf, const float* dout, const float* out,
                                                 const float* lse, const float* q, const float* k, const float* v,
                                                 const int4* tiles, int ldq, int ldkv, int ldo, int lddq, int T,
                                                 int NH, int KVH, int HS, float scale) {
    attention_backward_dq_t(dq, Dbuf, dout, out, lse, q, k, v, tiles, ldq, ldkv, ldo, lddq, T, NH, KVH, HS, scale);
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dq_bf16(float* dq, float* Dbuf, const float* dout, const bf16* out,
                                                 const float* lse, const bf16* q, const bf16* k, const bf16* v,
                                                 const int4* tiles, int ldq, int ldkv, int ldo, int lddq, int T,
                                                 int NH, int KVH, int HS, float scale) {
    attention_backward_dq_t(dq, Dbuf, dout, out, lse, q, k, v, tiles, ldq, ldkv, ldo, lddq, T, NH, KVH, HS, scale);
}

// dK = Σ_h dSᵀ·Q and dV = Σ_h Pᵀ·dO over the query heads h of a key-value
// head. A block owns up to BQ key rows of one sequence (one per warp) and
// one key-value head, so every dK and dV row has a single writer and is
// written (=) once. Tiles: x = first key row, y = rows, z = end of the
// sequence (exclusive). Queries stream through shared memory BK at a time;
// lane j handles query j of the tile.
template <typename Q>
__device__ __forceinline__ void attention_backward_dkv_t(float* dk, float* dv, const float* dout, const float* Dbuf,
                                                  const float* lse, const Q* q, const Q* k, const Q* v,
                                                  const int4* tiles, int ldq, int ldkv, int ldo, int lddkv, int T,
                                                  int NH, int KVH, int HS, float scale) {
    extern __shared__ float smem[];
    int HSP = HS + 1;
    float* Qs = smem;
    float* dOs = Qs + BK * HSP;
    float* Kw = dOs + BK * HSP;
    float* Vw = Kw + BQ * HS;
    float* ls = Vw + BQ * HS;
    float* Ds = ls + BK;
    int4 tile = tiles[blockIdx.x];
    int kvh = blockIdx.y, group = NH / KVH;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    bool active = warp < tile.y;
    int tk = tile.x + warp;
    int end = tile.z;
    if (active) {
        for (int d = lane; d < HS; d += 32) {
            long long src = (long long)tk * ldkv + kvh * HS + d;
            Kw[warp * HS + d] = load_f(k, src);
            Vw[warp * HS + d] = load_f(v, src);
        }
    }
    float dka[MAXD], dva[MAXD];
#pragma unroll
    for (int i = 0; i < MAXD; i++) dka[i] = dva[i] = 0.0f;
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
        for (int t0 = tile.x; t0 < end; t0 += BK) {
            int nt = min(BK, end - t0);
            __syncthreads();
            for (int e = threadIdx.x; e < nt * HS; e += blockDim.x) {
                int r = e / HS, d = e - r * HS;
                Qs[r * HSP + d] = load_f(q, (long long)(t0 + r) * ldq + h * HS + d);
                dOs[r * HSP + d] = dout[(long long)(t0 + r) * ldo + h * HS + d];
            }
            for (int r = threadIdx.x; r < nt; r += blockDim.x) {
                ls[r] = lse[(long long)h * T + t0 + r];
                Ds[r] = Dbuf[(long long)h * T + t0 + r];
            }
            __syncthreads();
            if (!active || t0 + nt <= tk) continue;
            float p = 0.0f, ds = 0.0f;
            if (lane < nt && t0 + lane >= tk) {
                float s = 0.0f, dp = 0.0f;
                for (int d = 0; d < HS; d++) {
                    s += Qs[lane * HSP + d] * Kw[warp * HS + d];
                    dp += dOs[lane * HSP + d] * Vw[warp * HS + d];
                }
                p = expf(s * scale - ls[lane]);
                ds = p * (dp - Ds[lane]) * scale;
            }
            int j1 = max(0, tk - t0);
            for (int j = j1; j < nt; j++) {
                float pj = __shfl_sync(0xffffffffu, p, j);
                float dsj = __shfl_sync(0xffffffffu, ds, j);
#pragma unroll
                for (int i = 0; i < MAXD; i++) {
                    int d = lane + 32 * i;
                    if (d < HS) {
                        dka[i] += dsj * Qs[j * HSP + d];
                        dva[i] += pj * dOs[j * HSP + d];
                    }
                }
            }
        }
    }
    if (active) {
#pragma unroll
        for (int i = 0; i < MAXD; i++) {
            int d = lane + 32 * i;
            if (d < HS) {
                dk[(long long)tk * lddkv + kvh * HS + d] = dka[i];
                dv[(long long)tk * lddkv + kvh * HS + d] = dva[i];
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dkv(float* dk, float* dv, const float* dout, const float* Dbuf,
                                                  const float* lse, const float* q, const float* k, const float* v,
                                                  const int4* tiles, int ldq, int ldkv, int ldo, int lddkv, int T,
                                                  int NH, int KVH, int HS, float scale) {
    attention_backward_dkv_t(dk, dv, dout, Dbuf, lse, q, k, v, tiles, ldq, ldkv, ldo, lddkv, T, NH, KVH, HS, scale);
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dkv_bf16(float* dk, float* dv, const float* dout, const float* Dbuf,
                                                  const float* lse, const bf16* q, const bf16* k, const bf16* v,
                                                  const int4* tiles, int ldq, int ldkv, int ldo, int lddkv, int T,
                                                  int NH, int KVH, int HS, float scale) {
    attention_backward_dkv_t(dk, dv, dout, Dbuf, lse, q, k, v, tiles, ldq, ldkv, ldo, lddkv, T, NH, KVH, HS, scale);
}
