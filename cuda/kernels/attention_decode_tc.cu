// Decode attention on tensor cores against a bf16 KV cache: every packed
// row is one new token of its cache slot. A block serves one (row, key-value
// head, split): the G = NH/KVH query heads of the group fill the 16 rows of
// mma.m16n8k16 (rows ≥ G are zero), so each key and value read from the
// cache is used by the whole group at once, and the read, not the math,
// bounds the kernel. The block's keys stream through shared memory in
// 64-key tiles, three in flight (cp.async groups); each of the 4 warps
// takes 16 keys of a tile:
//
//	S = Q·Kᵀ                 (16 heads × 16 keys, HS/8 mma)
//	m, l                      online softmax in log2 units, per warp
//	O += P·V                  P split into bf16 hi + lo parts (2·HS/8 mma)
//
// Splitting P into two bf16 terms keeps its rounding error at 2^-17
// relative, so with bf16 q, k and v (exact operands) the result is as
// accurate as the float32 CUDA-core kernel; the extra products are cheap
// next to the cache read. At the end the 4 warps' (m, l, O) merge through
// shared memory.
//
// The row's own key and value (position pos = keys − 1) are not read from
// the cache: the block whose split holds pos takes them from qkv, adds the
// bias and rotates k (as AddBias and RoPE would), writes them into the
// cache and folds them into the merged softmax. The other blocks read only
// positions below pos, so no block reads what another writes. The queries
// get the same bias and rotation on their way into shared memory. bias or
// invfreq may be null (qkv already biased or rotated).
//
// Splits (gridDim.z > 1, rows too few to fill the GPU): split z covers keys
// [z·chunk, (z+1)·chunk) with chunk = ceil(keys/splits) rounded up to a
// whole tile, so short rows leave splits empty. Each block writes its
// normalised O and its log2-sum-exp (−inf when empty) to po and pl; the
// last block of a (row, head) to arrive, counted in count (zero between
// launches), combines them into out and resets the count, so a split
// launch is still one kernel.
#include "common.cuh"
#include "tc.cuh"

#define DEC_KEYS 64     // keys per shared-memory tile, 16 per warp
#define DEC_STAGES 3    // tiles in flight
#define DEC_THREADS 128 // 4 warps
#define DEC_M 16        // mma rows: the query heads of a group, padded

// dec_swz is the element offset of (row, col) in a [rows][HS] bf16 tile
// whose 16-byte chunks are XOR-swizzled by row % 8: the 8 rows of one
// ldmatrix phase fall in 8 different bank quads.
template <int HS> __device__ __forceinline__ int dec_swz(int row, int col) {
    return row * HS + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

__device__ __forceinline__ float dec_round(float x) { return bf16_to_float(float_to_bf16(x)); }

// dec_bias is element c of the bias (float, or bf16 when bbf), 0 without one.
__device__ __forceinline__ float dec_bias(const void* b, int bbf, int c) {
    if (b == 0) return 0.0f;
    return bbf ? bf16_to_float(((const bf16*)b)[c]) : ((const float*)b)[c];
}

// dec_rotate turns the pair (x[i], x[i + HS/2]) of a q or k head as
// rope.cu does (the angle rounded to float, here its cos and sin in rot,
// the rotation in double) and rounds each result to bf16, as the rotated
// head is stored.
__device__ __forceinline__ void dec_rotate(float& x0, float& x1, const double* rot, int i) {
    double c = rot[2 * i], s = rot[2 * i + 1];
    double y0 = x0, y1 = x1;
    x0 = dec_round((float)(y0 * c - y1 * s));
    x1 = dec_round((float)(y1 * c + y0 * s));
}

// dec_u4 is 8 bf16 values, one 16-byte load.
struct alignas(16) dec_u4 {
    u32 w[4];
};

// dec_load_tile queues the copies of cache rows [0, valid) of one K and V
// tile (row stride kvw) into the swizzled stage buffers; rows past valid
// are zero-filled (nothing read), so masked keys meet zero values.
template <int HS>
__device__ __forceinline__ void dec_load_tile(bf16* ks, bf16* vs, const bf16* kb, const bf16* vb, int kvw, int valid) {
    constexpr int CH = HS / 8; // 16-byte chunks per row
    for (int c = threadIdx.x; c < DEC_KEYS * CH; c += DEC_THREADS) {
        int r = c / CH, ch = c - r * CH;
        bool ok = r < valid;
        long long off = ok ? (long long)r * kvw + ch * 8 : 0;
        int dst = dec_swz<HS>(r, ch * 8);
        tc_cp_async16(ks + dst, kb + off, ok ? 16 : 0);
        tc_cp_async16(vs + dst, vb + off, ok ? 16 : 0);
    }
}

// Shared memory: DEC_STAGES K tiles, DEC_STAGES V tiles, the query tile,
// the staged q, k and v, the rotation's cos and sin (doubles), then floats: the new key and value, their scores, and the merge's
// per-warp and per-head statistics. After the key loop the K tiles hold
// the warps' partial outputs, then the split weights of the combine.
template <int HS>
__device__ __forceinline__ void attention_decode_tc_t(bf16* out, float* po, float* pl, int* count, const bf16* qkv, bf16* kc,
                                                      bf16* vc, const int2* rows, const void* bias, int biasbf,
                                                      const float* invfreq, int ldq, int kvw, int ldo, int NH, int KVH,
                                                      float scale) {
    extern __shared__ float smem[];
    constexpr int TILE = DEC_KEYS * HS;
    bf16* Ks = (bf16*)smem;
    bf16* Vs = Ks + DEC_STAGES * TILE;
    bf16* Qs = Vs + DEC_STAGES * TILE;
    bf16* stg = Qs + DEC_M * HS;                    // [18][HS] q heads, (row 16) k, (17) v, biased
    double* rot = (double*)(stg + (DEC_M + 2) * HS); // [HS/2][2] cos, sin of the row's angles
    float* knew = (float*)(rot + HS);
    float* vnew = knew + HS;
    float* snew = vnew + HS;   // [16] new key's score per head (log2 units)
    float* wm = snew + DEC_M;  // [4][16] warps' row maxima
    float* wl = wm + 4 * DEC_M; // [4][16] warps' row sums, then their merge weights
    float* rM = wl + 4 * DEC_M; // [16] merged maxima
    float* rL = rM + DEC_M;     // [16] merged sums
    float* rB = rL + DEC_M;     // [16] the new key's weight
    int* flag = (int*)(rB + DEC_M);

    const int t = blockIdx.x, kvh = blockIdx.y, z = blockIdx.z, S = gridDim.z;
    const int G = NH / KVH, half = HS / 2;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
    const int2 r = rows[t];
    const int nk = r.y, pos = nk - 1;
    int chunk = (nk + S - 1) / S;
    chunk = (chunk + DEC_KEYS - 1) / DEC_KEYS * DEC_KEYS;
    const int lo = z * chunk, hi = min(nk, lo + chunk);
    const bool own = lo <= pos && pos < hi; // this split holds the new key
    const int hc = min(hi, pos);            // cached keys: [lo, hc)
    const int nt = hc > lo ? (hc - lo + DEC_KEYS - 1) / DEC_KEYS : 0;
    const bf16* kb = kc + ((long long)r.x + lo) * kvw + kvh * HS;
    const bf16* vb = vc + ((long long)r.x + lo) * kvw + kvh * HS;

    for (int s = 0; s < DEC_STAGES - 1; s++) {
        if (s < nt) dec_load_tile<HS>(Ks + s * TILE, Vs + s * TILE, kb + (long long)s * DEC_KEYS * kvw, vb + (long long)s * DEC_KEYS * kvw, kvw, hc - lo - s * DEC_KEYS);
        tc_cp_commit();
    }

    // While the first tiles load: the group's queries, and the new key and
    // value when this split holds them, biased and rounded (as AddBias
    // leaves them) into stg, all loads issued at once; the rotation's
    // angles (shared by every head); then the rotated queries into Qs and
    // the new key and value into the cache and knew, vnew.
    const bf16* qrow = qkv + (long long)t * ldq;
    const int qcol = kvh * G * HS, kcol = NH * HS + kvh * HS, vcol = (NH + KVH) * HS + kvh * HS;
    const long long crow = ((long long)r.x + pos) * kvw + kvh * HS;
    constexpr int CH = HS / 8;
    for (int e = threadIdx.x; e < (own ? G + 2 : G) * CH; e += DEC_THREADS) {
        int h = e / CH, c = e - h * CH;
        int col = (h < G ? qcol + h * HS : h == G ? kcol : vcol) + c * 8;
        dec_u4 x = *(const dec_u4*)(qrow + col);
        bf16* dst = stg + (h < G ? h : DEC_M + h - G) * HS + c * 8;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            bf16 v = (bf16)(x.w[j >> 1] >> (16 * (j & 1)));
            if (bias != 0) v = float_to_bf16(bf16_to_float(v) + dec_bias(bias, biasbf, col + j));
            dst[j] = v;
        }
    }
    if (invfreq != 0) {
        for (int i = threadIdx.x; i < half; i += DEC_THREADS) {
            float a = (float)((double)pos * (double)invfreq[i]);
            double sn, cs;
            sincos((double)a, &sn, &cs);
            rot[2 * i] = cs;
            rot[2 * i + 1] = sn;
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < (DEC_M + 1) * half; e += DEC_THREADS) {
        int h = e / half, i = e - h * half; // h = DEC_M: the new key
        if (h < DEC_M && h >= G) {
            Qs[dec_swz<HS>(h, i)] = 0;
            Qs[dec_swz<HS>(h, i + half)] = 0;
            continue;
        }
        if (h == DEC_M && !own) continue;
        float x0 = bf16_to_float(stg[h * HS + i]), x1 = bf16_to_float(stg[h * HS + i + half]);
        if (invfreq != 0) dec_rotate(x0, x1, rot, i);
        if (h < DEC_M) {
            Qs[dec_swz<HS>(h, i)] = float_to_bf16(x0);
            Qs[dec_swz<HS>(h, i + half)] = float_to_bf16(x1);
        } else {
            knew[i] = x0;
            knew[i + half] = x1;
            kc[crow + i] = float_to_bf16(x0);
            kc[crow + i + half] = float_to_bf16(x1);
        }
    }
    if (own) {
        for (int d = threadIdx.x; d < HS; d += DEC_THREADS) {
            bf16 v = stg[(DEC_M + 1) * HS + d];
            vnew[d] = bf16_to_float(v);
            vc[crow + d] = v;
        }
    }
    __syncthreads();
    u32 qa[HS / 16][4];
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) tc_ldmatrix_x4(qa[kk], &Qs[dec_swz<HS>(lane & 15, kk * 16 + (lane >> 4) * 8)]);

    const float sl2 = scale * 1.4426950408889634f; // scores in log2 units
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};
    float o[HS / 8][4];
#pragma unroll
    for (int d = 0; d < HS / 8; d++) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;

    for (int j = 0; j < nt; j++) {
        tc_cp_wait<DEC_STAGES - 2>(); // tile j has landed
        __syncthreads();              // and every warp is done with tile j − 1's stage
        int jn = j + DEC_STAGES - 1;
        if (jn < nt) {
            int st = jn % DEC_STAGES;
            dec_load_tile<HS>(Ks + st * TILE, Vs + st * TILE, kb + (long long)jn * DEC_KEYS * kvw, vb + (long long)jn * DEC_KEYS * kvw, kvw, hc - lo - jn * DEC_KEYS);
        }
        tc_cp_commit();
        const bf16* Kt = Ks + (j % DEC_STAGES) * TILE;
        const bf16* Vt = Vs + (j % DEC_STAGES) * TILE;
        const int key0 = warp * 16; // this warp's keys of the tile

        // S = Q·Kᵀ: 16 heads × the warp's 16 keys, two n-tiles of 8 keys.
        float s[2][4];
#pragma unroll
        for (int n = 0; n < 2; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < HS / 16; kk++) {
            u32 b[4];
            tc_ldmatrix_x4(b, &Kt[dec_swz<HS>(key0 + (lane & 7) + ((lane >> 4) << 3), kk * 16 + ((lane >> 3) & 1) * 8)]);
            tc_mma_bf16(s[0], qa[kk], b);
            tc_mma_bf16(s[1], qa[kk], b + 2);
        }
        // Keys past the split's cached range (the last tile) are masked.
        int left = hc - lo - j * DEC_KEYS - key0; // visible keys of this warp
        float rmax[2] = {NEG_INF, NEG_INF};
#pragma unroll
        for (int n = 0; n < 2; n++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float x = s[n][e] * sl2;
                if (n * 8 + 2 * tq + (e & 1) >= left) x = NEG_INF;
                s[n][e] = x;
                rmax[e >> 1] = fmaxf(rmax[e >> 1], x);
            }
        }
        float corr[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            rmax[i] = fmaxf(rmax[i], __shfl_xor_sync(0xffffffffu, rmax[i], 1));
            rmax[i] = fmaxf(rmax[i], __shfl_xor_sync(0xffffffffu, rmax[i], 2));
            float mn = fmaxf(m[i], rmax[i]);
            // A warp that has seen no key keeps m = −inf: no rescale, p = 0.
            corr[i] = mn == NEG_INF ? 1.0f : tc_exp2(m[i] - mn);
            m[i] = mn;
            l[i] *= corr[i];
        }
#pragma unroll
        for (int d = 0; d < HS / 8; d++) {
            o[d][0] *= corr[0];
            o[d][1] *= corr[0];
            o[d][2] *= corr[1];
            o[d][3] *= corr[1];
        }
        // P = 2^(S − m) straight into A fragments (the accumulator layout of
        // S is the A layout): hi = bf16(p), lo = bf16(p − hi).
        u32 ph[4], pq[4];
#pragma unroll
        for (int n = 0; n < 2; n++) {
            float p[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float mm = m[e >> 1];
                p[e] = mm == NEG_INF ? 0.0f : tc_exp2(s[n][e] - mm);
                l[e >> 1] += p[e];
            }
#pragma unroll
            for (int i = 0; i < 2; i++) { // i = 0: head g, i = 1: head g + 8
                u32 h = tc_pack_bf16x2(p[2 * i], p[2 * i + 1]);
                ph[2 * n + i] = h;
                pq[2 * n + i] = tc_pack_bf16x2(p[2 * i] - __uint_as_float(h << 16), p[2 * i + 1] - __uint_as_float(h & 0xffff0000u));
            }
        }
        // O += P·V over the warp's 16 keys; V is [key][dim]: B needs .trans.
#pragma unroll
        for (int d = 0; d < HS / 8; d += 2) {
            u32 b[4];
            tc_ldmatrix_x4_trans(b, &Vt[dec_swz<HS>(key0 + (lane & 7) + ((lane >> 3) & 1) * 8, d * 8 + (lane >> 4) * 8)]);
            tc_mma_bf16(o[d], ph, b);
            tc_mma_bf16(o[d + 1], ph, b + 2);
            tc_mma_bf16(o[d], pq, b);
            tc_mma_bf16(o[d + 1], pq, b + 2);
        }
    }
    tc_cp_wait<0>();
    __syncthreads(); // the K tiles become the merge buffer

    // Each warp's (m, l, O) of the group's heads into shared memory.
    float* Om = smem; // [4][16][HS]
#pragma unroll
    for (int i = 0; i < 2; i++) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
        int h = g + 8 * i;
        if (h >= G) continue;
        float* orow = Om + (warp * DEC_M + h) * HS;
#pragma unroll
        for (int d = 0; d < HS / 8; d++) {
            orow[d * 8 + 2 * tq] = o[d][2 * i];
            orow[d * 8 + 2 * tq + 1] = o[d][2 * i + 1];
        }
        if (tq == 0) {
            wm[warp * DEC_M + h] = m[i];
            wl[warp * DEC_M + h] = l[i];
        }
    }
    // The new key's score for each head, one warp per head.
    if (own) {
        for (int h = warp; h < G; h += 4) {
            float dot = 0.0f;
            for (int d = lane; d < HS; d += 32) dot += bf16_to_float(Qs[dec_swz<HS>(h, d)]) * knew[d];
            dot = warp_sum(dot);
            if (lane == 0) snew[h] = dot * sl2;
        }
    }
    __syncthreads();
    if (threadIdx.x < G) {
        int h = threadIdx.x;
        float M = own ? snew[h] : NEG_INF;
        for (int w = 0; w < 4; w++) M = fmaxf(M, wm[w * DEC_M + h]);
        float L = 0.0f;
        for (int w = 0; w < 4; w++) {
            float mw = wm[w * DEC_M + h];
            float f = mw == NEG_INF ? 0.0f : tc_exp2(mw - M);
            L += f * wl[w * DEC_M + h];
            wl[w * DEC_M + h] = f;
        }
        float bnew = own ? tc_exp2(snew[h] - M) : 0.0f;
        L += bnew;
        rB[h] = bnew;
        rL[h] = L;
        rM[h] = M;
    }
    __syncthreads();
    const long long part = ((long long)t * KVH + kvh) * S + z; // this block's partial
    for (int e = threadIdx.x; e < G * HS; e += DEC_THREADS) {
        int h = e / HS, d = e - h * HS;
        float acc = own ? rB[h] * vnew[d] : 0.0f;
#pragma unroll
        for (int w = 0; w < 4; w++) acc += wl[w * DEC_M + h] * Om[(w * DEC_M + h) * HS + d];
        float L = rL[h];
        if (S == 1) {
            out[(long long)t * ldo + (kvh * G + h) * HS + d] = float_to_bf16(acc / L);
        } else {
            po[part * G * HS + e] = L > 0.0f ? acc / L : 0.0f;
        }
    }
    if (S == 1) return;
    if (threadIdx.x < G) pl[part * G + threadIdx.x] = rL[threadIdx.x] > 0.0f ? rM[threadIdx.x] + log2f(rL[threadIdx.x]) : NEG_INF;

    // The last split of (row, head) to finish combines them all.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) *flag = atomicAdd(&count[t * KVH + kvh], 1) == S - 1;
    __syncthreads();
    if (!*flag) return;
    __threadfence();
    const long long part0 = ((long long)t * KVH + kvh) * S;
    const volatile float* vl = pl + part0 * G;
    const volatile float* vo = po + part0 * G * HS;
    float* wz = smem; // [G][S] split weights, normalised
    for (int e = threadIdx.x; e < S * G; e += DEC_THREADS) {
        int k = e / G, h = e - k * G;
        wz[h * S + k] = vl[e];
    }
    __syncthreads();
    if (threadIdx.x < G) {
        float* w = wz + threadIdx.x * S;
        float M = NEG_INF;
        for (int k = 0; k < S; k++) M = fmaxf(M, w[k]);
        float sum = 0.0f;
        for (int k = 0; k < S; k++) {
            float f = w[k] == NEG_INF ? 0.0f : tc_exp2(w[k] - M);
            w[k] = f;
            sum += f;
        }
        for (int k = 0; k < S; k++) w[k] /= sum;
    }
    __syncthreads();
    // An empty split's partial output is zero, as is its weight.
    for (int e = threadIdx.x; e < G * HS; e += DEC_THREADS) {
        int h = e / HS, d = e - h * HS;
        const float* w = wz + h * S;
        float acc = 0.0f;
#pragma unroll 4
        for (int k = 0; k < S; k++) acc += w[k] * vo[(long long)k * G * HS + e];
        out[(long long)t * ldo + (kvh * G + h) * HS + d] = float_to_bf16(acc);
    }
    if (threadIdx.x == 0) count[t * KVH + kvh] = 0; // ready for the next launch
}

extern "C" __global__ void __launch_bounds__(128) attention_decode_tc64(bf16* out, float* po, float* pl, int* count, const bf16* qkv,
                                                                        bf16* kc, bf16* vc, const int2* rows, const void* bias,
                                                                        int biasbf, const float* invfreq, int ldq, int kvw, int ldo,
                                                                        int NH, int KVH, float scale) {
    attention_decode_tc_t<64>(out, po, pl, count, qkv, kc, vc, rows, bias, biasbf, invfreq, ldq, kvw, ldo, NH, KVH, scale);
}

extern "C" __global__ void __launch_bounds__(128) attention_decode_tc128(bf16* out, float* po, float* pl, int* count, const bf16* qkv,
                                                                         bf16* kc, bf16* vc, const int2* rows, const void* bias,
                                                                         int biasbf, const float* invfreq, int ldq, int kvw, int ldo,
                                                                         int NH, int KVH, float scale) {
    attention_decode_tc_t<128>(out, po, pl, count, qkv, kc, vc, rows, bias, biasbf, invfreq, ldq, kvw, ldo, NH, KVH, scale);
}
