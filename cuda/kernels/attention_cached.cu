// Attention against the KV cache, first half: write each packed row's key
// and value into its cache row (slot·maxLen + position). The second half
// is attention_forward of attention.cu, run with the cache as k and v.
#include "common.cuh"

// One thread per (row, column < kvw). dst[t] is the cache row of packed row t.
// KV is the cache's storage: float, or bf16 (rounded to nearest even) for
// a cache stored in bf16 under mixed precision. S is the storage of the
// packed k and v: float, or bf16 for qkv stored in bf16 (then copied
// exactly into a bf16 cache).
template <typename KV, typename S>
__device__ __forceinline__ void kv_cache_write_t(KV* kc, KV* vc, const S* k, const S* v, const int* dst, int T, int ldkv,
                                                 int kvw) {
    long long n = (long long)T * kvw;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {
        long long t = e / kvw;
        int c = (int)(e - t * kvw);
        long long d = (long long)dst[t] * kvw + c;
        store_f(kc, d, load_f(k, t * ldkv + c));
        store_f(vc, d, load_f(v, t * ldkv + c));
    }
}

extern "C" __global__ void __launch_bounds__(256) kv_cache_write(float* kc, float* vc, const float* k, const float* v, const int* dst,
                                          int T, int ldkv, int kvw) {
    kv_cache_write_t(kc, vc, k, v, dst, T, ldkv, kvw);
}

extern "C" __global__ void __launch_bounds__(256) kv_cache_write_bf16(bf16* kc, bf16* vc, const float* k, const float* v,
                                                                      const int* dst, int T, int ldkv, int kvw) {
    kv_cache_write_t(kc, vc, k, v, dst, T, ldkv, kvw);
}

extern "C" __global__ void __launch_bounds__(256) kv_cache_write_qbf16(bf16* kc, bf16* vc, const bf16* k, const bf16* v,
                                                                       const int* dst, int T, int ldkv, int kvw) {
    kv_cache_write_t(kc, vc, k, v, dst, T, ldkv, kvw);
}

#define DBK 32   // keys per shared-memory tile
#define DMAXD 8  // head size ≤ 32·DMAXD = 256

// Decode attention: one query row per block and one key-value head, one
// warp per query head of that head's group, so the group's query heads
// share every key and value read from the cache (decode attention is bound
// by reading the cache; the generic kernel would read it once per query
// head). Row t sees cache rows base[t] .. base[t] + nkeys[t] − 1; rows is an
// int2 per packed row: (first cache row of its slot, keys it sees).
// O and Q are the storages of out and q: float, or bf16 for a step's qkv
// and attention output stored in bf16 under mixed precision.
template <typename O, typename Q, typename KV>
__device__ __forceinline__ void attention_decode_t(O* out, const Q* q, const KV* kc, const KV* vc, const int2* rows, int ldq,
                                                   int kvw, int ldo, int NH, int KVH, int HS, float scale) {
    extern __shared__ float smem[];
    int HSP = HS + 1;
    float* Ks = smem;
    float* Vs = Ks + DBK * HSP;
    float* Qs = Vs + DBK * HSP;
    int t = blockIdx.x, kvh = blockIdx.y, group = NH / KVH;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int h = kvh * group + warp;
    int2 r = rows[t];
    int nk = r.y;
    for (int d = lane; d < HS; d += 32) Qs[warp * HS + d] = load_f(q, (long long)t * ldq + h * HS + d);
    float m = NEG_INF, l = 0.0f, acc[DMAXD];
#pragma unroll
    for (int i = 0; i < DMAXD; i++) acc[i] = 0.0f;
    for (int j0 = 0; j0 < nk; j0 += DBK) {
        int nt = min(DBK, nk - j0);
        __syncthreads();
        for (int e = threadIdx.x; e < nt * HS; e += blockDim.x) {
            int rr = e / HS, d = e - rr * HS;
            long long src = (long long)(r.x + j0 + rr) * kvw + kvh * HS + d;
            Ks[rr * HSP + d] = load_f(kc, src);
            Vs[rr * HSP + d] = load_f(vc, src);
        }
        __syncthreads();
        float s = NEG_INF;
        if (lane < nt) {
            float dot = 0.0f;
            for (int d = 0; d < HS; d++) dot += Qs[warp * HS + d] * Ks[lane * HSP + d];
            s = dot * scale;
        }
        float mn = fmaxf(m, warp_max(s));
        float corr = expf(m - mn);
        float p = s == NEG_INF ? 0.0f : expf(s - mn);
        l = l * corr + warp_sum(p);
#pragma unroll
        for (int i = 0; i < DMAXD; i++) acc[i] *= corr;
        for (int j = 0; j < nt; j++) {
            float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
            for (int i = 0; i < DMAXD; i++) {
                int d = lane + 32 * i;
                if (d < HS) acc[i] += pj * Vs[j * HSP + d];
            }
        }
        m = mn;
    }
    float inv = 1.0f / l;
#pragma unroll
    for (int i = 0; i < DMAXD; i++) {
        int d = lane + 32 * i;
        if (d < HS) store_f(out, (long long)t * ldo + h * HS + d, acc[i] * inv);
    }
}

extern "C" __global__ void __launch_bounds__(512) attention_decode(float* out, const float* q, const float* kc, const float* vc,
                                                                   const int2* rows, int ldq, int kvw, int ldo, int NH,
                                                                   int KVH, int HS, float scale) {
    attention_decode_t(out, q, kc, vc, rows, ldq, kvw, ldo, NH, KVH, HS, scale);
}

// The same over a bf16 cache: keys and values widen exactly as they are
// read; scores, softmax and the output accumulate in float.
extern "C" __global__ void __launch_bounds__(512) attention_decode_kvbf16(float* out, const float* q, const bf16* kc, const bf16* vc,
                                                                          const int2* rows, int ldq, int kvw, int ldo, int NH,
                                                                          int KVH, int HS, float scale) {
    attention_decode_t(out, q, kc, vc, rows, ldq, kvw, ldo, NH, KVH, HS, scale);
}

// q, the cache and the output all bf16 (mixed precision's decode step).
extern "C" __global__ void __launch_bounds__(512) attention_decode_bf16(bf16* out, const bf16* q, const bf16* kc, const bf16* vc,
                                                                       const int2* rows, int ldq, int kvw, int ldo, int NH,
                                                                       int KVH, int HS, float scale) {
    attention_decode_t(out, q, kc, vc, rows, ldq, kvw, ldo, NH, KVH, HS, scale);
}
