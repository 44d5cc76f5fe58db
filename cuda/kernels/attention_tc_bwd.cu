// The backward of the tensor-core attention (attention_tc.cu), for bf16
// q|k|v of head size 64 and 128, in the three parts flash attention uses.
// attention_tc_bwd_pre computes D = rowsum(dO ⊙ O) per row and head, rounds
// dO to bf16 (the products' operand) and, for the atomic path, zeroes dqkv. The main kernel
// owns 64 keys (16 per warp) and walks the query tiles that see them, from
// the diagonal to the end of the sequence, in the transposed orientation
// (keys are the M dimension, so the accumulators of one product are the A
// fragments of the next):
//   Sᵀ = K·Qᵀ, Pᵀ = 2^(Sᵀ·scale·log2e − lse·log2e), dPᵀ = V·dOᵀ,
//   dSᵀ = Pᵀ ⊙ (dPᵀ − D), dV += Pᵀ·dO, dK += dSᵀ·Q.
// Fast path: a block per (key tile, query head), so a 4K row of a 14/2-head
// model has 448 blocks instead of 64; dQ += dS·K per query tile and the
// group's dK and dV are added into dqkv with atomic reductions, whose order
// varies between runs (results agree to rounding). Deterministic path: the
// same blocks write each query head's dK and dV share to a scratch that
// attention_tc_dkv_sum adds up in head order, and attention_tc_dq computes
// dQ per query tile (S, P and dP again: seven products instead of five)
// and writes it once.
// Key tiles (int4): x = first key row, y = rows, z = end of the sequence.
#include "flash.cuh"

// One block per row; warp w takes heads w, w + 4, ...
extern "C" __global__ void __launch_bounds__(128) attention_tc_bwd_pre(float* Dbuf, bf16* dob, float* dqkv, const float* dout,
                                                                             const bf16* out, int T, int NH, int HS, int W, int zero) {
    int tq = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int h = warp; h < NH; h += FA_WARPS) {
        float part = 0.0f;
        for (int d = lane; d < HS; d += 32) {
            long long i = (long long)tq * NH * HS + h * HS + d;
            float gr = dout[i];
            part += gr * bf16_to_float(out[i]);
            dob[i] = float_to_bf16(gr);
        }
        part = warp_sum(part);
        if (lane == 0) Dbuf[(long long)h * T + tq] = part;
    }
    if (zero)
        for (int c = threadIdx.x; c < W; c += FA_THREADS) dqkv[(long long)tq * W + c] = 0.0f;
}

// fa_bwd_issue copies the query tile at q0 (Q and dO rows of head h) into
// buffer buf; lse and D go by plain stores, read after the barrier that
// also retires the copies.
template <int HS, int THREADS>
__device__ __forceinline__ void fa_bwd_issue(bf16* Qs, bf16* dOs, float* ls, float* Ds, const bf16* q, const bf16* dob,
                                             const float* lse, const float* Dbuf, int q0, int buf, int end, int h, int W,
                                             int QO, int T) {
    constexpr int B = 64;
    int valid = end - q0;
    fa_load_rows<HS, B, THREADS>(Qs + buf * B * HS, q + (long long)q0 * W + h * HS, W, valid);
    fa_load_rows<HS, B, THREADS>(dOs + buf * B * HS, dob + (long long)q0 * QO + h * HS, QO, valid);
    for (int r = threadIdx.x; r < B; r += THREADS) {
        bool ok = r < valid;
        ls[buf * B + r] = ok ? lse[(long long)h * T + q0 + r] * FA_LOG2E : -NEG_INF;
        Ds[buf * B + r] = ok ? Dbuf[(long long)h * T + q0 + r] : 0.0f;
    }
}

// fa_red_add2 adds (a, b) to p[0..1]: one 8-byte vector reduction where
// dqkv is 8-byte aligned (pairs; a training step's gradient arena need not
// be), else two scalar ones.
__device__ __forceinline__ void fa_red_add2(float* p, float a, float b, int pairs) {
    if (pairs) {
        tc_red_add2(p, a, b);
    } else {
        tc_red_add(p, a);
        tc_red_add(p + 1, b);
    }
}

// KW warps own 16 keys each: a block of 4 warps owns 64 keys, one of 8
// owns 128 (the query tiles it loads and the dQ reductions it makes then
// serve twice the keys).
template <int HS, bool DET, int KW>
__device__ __forceinline__ void attention_tc_bwd_t(float* dqkv, float* part, const bf16* q, const bf16* k, const bf16* v,
                                                   const bf16* dob, const float* lse, const float* Dbuf, const int4* tiles, int W,
                                                   int T, int NH, int KVH, float scale, int pairs) {
    constexpr int B = 64, QP = HS > 64 ? 32 : 64, BK = 16 * KW, THREADS = 32 * KW;
    extern __shared__ float smem[];
    bf16* Ks = (bf16*)smem;             // [BK][HS]
    bf16* Vs = Ks + BK * HS;            // [BK][HS]
    bf16* Qs = Vs + BK * HS;            // [2][B][HS]
    bf16* dOs = Qs + 2 * B * HS;        // [2][B][HS]
    bf16* dSs = dOs + 2 * B * HS;       // [BK keys][B queries], the fast path's dQ operand
    float* ls = (float*)(dSs + BK * B); // [2][B] lse·log2e of the tile's queries, +inf past the end
    float* Ds = ls + 2 * B;             // [2][B]
    int4 tile = tiles[blockIdx.x];
    int h = blockIdx.y, kvh = h / (NH / KVH);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int x = tile.x, end = tile.z;
    const float sl2 = scale * FA_LOG2E;
    const int QO = NH * HS; // row stride of dO
    int key0 = warp * 16;   // this warp's keys, from x
    int nq = (end - x + B - 1) / B;

    fa_load_rows<HS, BK, THREADS>(Ks, k + (long long)x * W + kvh * HS, W, tile.y);
    fa_load_rows<HS, BK, THREADS>(Vs, v + (long long)x * W + kvh * HS, W, tile.y);
    float dk[HS / 8][4], dv[HS / 8][4];
#pragma unroll
    for (int i = 0; i < HS / 8; i++) dk[i][0] = dk[i][1] = dk[i][2] = dk[i][3] = dv[i][0] = dv[i][1] = dv[i][2] = dv[i][3] = 0.0f;

    fa_bwd_issue<HS, THREADS>(Qs, dOs, ls, Ds, q, dob, lse, Dbuf, x, 0, end, h, W, QO, T);
    tc_cp_commit();
    for (int it = 0; it < nq; it++) {
        int q0 = x + it * B, buf = it & 1;
        if (it + 1 < nq) fa_bwd_issue<HS, THREADS>(Qs, dOs, ls, Ds, q, dob, lse, Dbuf, q0 + B, buf ^ 1, end, h, W, QO, T);
        tc_cp_commit();
        tc_cp_wait<1>();
        __syncthreads();
        const bf16* Qt = Qs + buf * B * HS;
        const bf16* dOt = dOs + buf * B * HS;
        // The query tile goes in passes of QP queries (all 64 at head size
        // 64; two halves at 128, where Sᵀ and dPᵀ of 64 queries would not
        // fit in registers beside dK and dV).
#pragma unroll 1
        for (int qp = 0; qp < B; qp += QP) {
            // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ: 16 keys × QP queries a warp.
            float s[QP / 8][4], dp[QP / 8][4];
#pragma unroll
            for (int n = 0; n < QP / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < HS / 16; kk++) {
                u32 ka[4], va[4];
                fa_frag_a<HS>(ka, Ks, key0, kk * 16);
                fa_frag_a<HS>(va, Vs, key0, kk * 16);
#pragma unroll
                for (int n = 0; n < QP / 8; n += 2) {
                    u32 b[4];
                    fa_frag_b_rows<HS>(b, Qt, qp + n * 8, kk * 16);
                    tc_mma_bf16(s[n], ka, b);
                    tc_mma_bf16(s[n + 1], ka, b + 2);
                    fa_frag_b_rows<HS>(b, dOt, qp + n * 8, kk * 16);
                    tc_mma_bf16(dp[n], va, b);
                    tc_mma_bf16(dp[n + 1], va, b + 2);
                }
            }
            // Pᵀ and dSᵀ. Element e of n tile n: key key0 + g (+8 for e ≥ 2),
            // query qp + n·8 + 2t + (e & 1). Only the first BK/B query tiles
            // hold queries before some of the block's keys.
#pragma unroll
            for (int n = 0; n < QP / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int key = key0 + g + (e >> 1) * 8, qq = qp + n * 8 + 2 * t + (e & 1);
                    float p = tc_exp2(fmaf(s[n][e], sl2, -ls[buf * B + qq]));
                    if (q0 < x + BK && x + key > q0 + qq) p = 0.0f;
                    s[n][e] = p;
                    dp[n][e] = p * (dp[n][e] - Ds[buf * B + qq]);
                }
            // dV += Pᵀ·dO, then dK += dSᵀ·Q, one operand packed at a time;
            // the k dimension is the queries.
#pragma unroll
            for (int kk = 0; kk < QP / 16; kk++) {
                u32 pa[4];
                fa_pack_a(pa, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
                for (int d = 0; d < HS / 8; d += 2) {
                    u32 b[4];
                    fa_frag_b_cols<HS>(b, dOt, qp + kk * 16, d * 8);
                    tc_mma_bf16(dv[d], pa, b);
                    tc_mma_bf16(dv[d + 1], pa, b + 2);
                }
            }
#pragma unroll
            for (int kk = 0; kk < QP / 16; kk++) {
                u32 dsa[4];
                fa_pack_a(dsa, dp[2 * kk], dp[2 * kk + 1]);
                if (!DET) { // dSᵀ for dQ: rows keys, columns queries
                    int c = qp + kk * 16 + 2 * t;
                    *(u32*)&dSs[fa_swz<B>(key0 + g, c)] = dsa[0];
                    *(u32*)&dSs[fa_swz<B>(key0 + g + 8, c)] = dsa[1];
                    *(u32*)&dSs[fa_swz<B>(key0 + g, c + 8)] = dsa[2];
                    *(u32*)&dSs[fa_swz<B>(key0 + g + 8, c + 8)] = dsa[3];
                }
#pragma unroll
                for (int d = 0; d < HS / 8; d += 2) {
                    u32 b[4];
                    fa_frag_b_cols<HS>(b, Qt, qp + kk * 16, d * 8);
                    tc_mma_bf16(dk[d], dsa, b);
                    tc_mma_bf16(dk[d + 1], dsa, b + 2);
                }
            }
        }
        if (!DET) {
            __syncthreads(); // dSᵀ complete
            // dQ = dS·K, A being dSᵀ read transposed: warp w takes the 16
            // queries w % 4 and, with 8 warps, half the columns (w / 4).
            constexpr int DH = HS * 4 / KW; // columns a warp
            float dq[DH / 8][4];
#pragma unroll
            for (int i = 0; i < DH / 8; i++) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.0f;
            int qw = (warp & 3) * 16, c0 = (warp >> 2) * DH;
#pragma unroll
            for (int kk = 0; kk < BK / 16; kk++) {
                u32 a[4];
                tc_ldmatrix_x4_trans(a, &dSs[fa_swz<B>(kk * 16 + (lane & 7) + (lane >> 4) * 8, qw + ((lane >> 3) & 1) * 8)]);
#pragma unroll
                for (int d = 0; d < DH / 8; d += 2) {
                    u32 b[4];
                    fa_frag_b_cols<HS>(b, Ks, kk * 16, c0 + d * 8);
                    tc_mma_bf16(dq[d], a, b);
                    tc_mma_bf16(dq[d + 1], a, b + 2);
                }
            }
#pragma unroll
            for (int i = 0; i < 2; i++) {
                int tq = q0 + qw + g + 8 * i;
                if (tq >= end) continue;
                float* row = dqkv + (long long)tq * W + h * HS + c0 + 2 * t;
#pragma unroll
                for (int d = 0; d < DH / 8; d++) fa_red_add2(row + d * 8, dq[d][2 * i] * scale, dq[d][2 * i + 1] * scale, pairs);
            }
        }
        __syncthreads(); // this buffer (and dSᵀ) is refilled next
    }
    tc_cp_wait<0>();
    // dK (scaled) and dV of the block's keys.
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int key = key0 + g + 8 * i;
        if (key >= tile.y) continue;
        float* rk = dqkv + (long long)(x + key) * W + (NH + kvh) * HS + 2 * t;
        float* rv = dqkv + (long long)(x + key) * W + (NH + KVH + kvh) * HS + 2 * t;
#pragma unroll
        for (int d = 0; d < HS / 8; d++) {
            if (DET) { // this head's share, summed over the group by attention_tc_dkv_sum
                float* pk = part + ((long long)h * T + x + key) * HS + 2 * t;
                float* pv = pk + (long long)NH * T * HS;
                pk[d * 8] = dk[d][2 * i] * scale;
                pk[d * 8 + 1] = dk[d][2 * i + 1] * scale;
                pv[d * 8] = dv[d][2 * i];
                pv[d * 8 + 1] = dv[d][2 * i + 1];
            } else {
                fa_red_add2(rk + d * 8, dk[d][2 * i] * scale, dk[d][2 * i + 1] * scale, pairs);
                fa_red_add2(rv + d * 8, dv[d][2 * i], dv[d][2 * i + 1], pairs);
            }
        }
    }
}

// dQ of the deterministic path: a block per (query tile of 64 rows, head),
// tiles as the forward's; the key tiles stream as in the forward and dQ
// stays in registers until one plain store.
template <int HS>
__device__ __forceinline__ void attention_tc_dq_t(float* dqkv, const bf16* q, const bf16* k, const bf16* v, const bf16* dob,
                                                  const float* lse, const float* Dbuf, const int4* tiles, int W, int T, int NH,
                                                  int KVH, float scale) {
    constexpr int B = 64;
    extern __shared__ float smem[];
    bf16* Qs = (bf16*)smem;       // [B][HS]
    bf16* dOs = Qs + B * HS;      // [B][HS]
    bf16* Ks = dOs + B * HS;      // [2][B][HS]
    bf16* Vs = Ks + 2 * B * HS;   // [2][B][HS]
    int4 tile = tiles[blockIdx.x];
    int h = blockIdx.y, kvh = h / (NH / KVH);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int nkAll = tile.w + tile.y - 1;
    int ntiles = (nkAll + B - 1) / B;
    const bf16* kb = k + (long long)tile.z * W + kvh * HS;
    const bf16* vb = v + (long long)tile.z * W + kvh * HS;
    const float sl2 = scale * FA_LOG2E;
    fa_load_rows<HS, B>(Qs, q + (long long)tile.x * W + h * HS, W, tile.y);
    fa_load_rows<HS, B>(dOs, dob + (long long)tile.x * NH * HS + h * HS, NH * HS, tile.y);
    fa_load_rows<HS, B>(Ks, kb, W, nkAll);
    fa_load_rows<HS, B>(Vs, vb, W, nkAll);
    tc_cp_commit();
    int r0 = warp * 16 + g; // this thread's rows: r0 and r0 + 8
    float lrow[2], drow[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        bool ok = r0 + 8 * i < tile.y;
        lrow[i] = ok ? lse[(long long)h * T + tile.x + r0 + 8 * i] * FA_LOG2E : -NEG_INF;
        drow[i] = ok ? Dbuf[(long long)h * T + tile.x + r0 + 8 * i] : 0.0f;
    }
    float dq[HS / 8][4];
#pragma unroll
    for (int i = 0; i < HS / 8; i++) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.0f;
    bool live = warp * 16 < tile.y;
    for (int j = 0; j < ntiles; j++) {
        int buf = j & 1;
        if (j + 1 < ntiles) {
            int k0 = (j + 1) * B;
            fa_load_rows<HS, B>(Ks + (buf ^ 1) * B * HS, kb + (long long)k0 * W, W, nkAll - k0);
            fa_load_rows<HS, B>(Vs + (buf ^ 1) * B * HS, vb + (long long)k0 * W, W, nkAll - k0);
        }
        tc_cp_commit();
        tc_cp_wait<1>();
        __syncthreads();
        const bf16* Kt = Ks + buf * B * HS;
        const bf16* Vt = Vs + buf * B * HS;
        int kbase = j * B;
        if (live && kbase < tile.w + warp * 16 + 15) {
            float s[B / 8][4], dp[B / 8][4];
#pragma unroll
            for (int n = 0; n < B / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < HS / 16; kk++) {
                u32 qa[4], oa[4];
                fa_frag_a<HS>(qa, Qs, warp * 16, kk * 16);
                fa_frag_a<HS>(oa, dOs, warp * 16, kk * 16);
#pragma unroll
                for (int n = 0; n < B / 8; n += 2) {
                    u32 b[4];
                    fa_frag_b_rows<HS>(b, Kt, n * 8, kk * 16);
                    tc_mma_bf16(s[n], qa, b);
                    tc_mma_bf16(s[n + 1], qa, b + 2);
                    fa_frag_b_rows<HS>(b, Vt, n * 8, kk * 16);
                    tc_mma_bf16(dp[n], oa, b);
                    tc_mma_bf16(dp[n + 1], oa, b + 2);
                }
            }
            bool edge = kbase + B > tile.w + warp * 16;
#pragma unroll
            for (int n = 0; n < B / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float p = tc_exp2(fmaf(s[n][e], sl2, -lrow[e >> 1]));
                    if (edge && kbase + n * 8 + 2 * t + (e & 1) >= tile.w + r0 + (e >> 1) * 8) p = 0.0f;
                    dp[n][e] = p * (dp[n][e] - drow[e >> 1]);
                }
            // dQ += dS·K: K rows are the k dimension here.
#pragma unroll
            for (int kk = 0; kk < B / 16; kk++) {
                u32 a[4];
                fa_pack_a(a, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
                for (int d = 0; d < HS / 8; d += 2) {
                    u32 b[4];
                    fa_frag_b_cols<HS>(b, Kt, kk * 16, d * 8);
                    tc_mma_bf16(dq[d], a, b);
                    tc_mma_bf16(dq[d + 1], a, b + 2);
                }
            }
        }
        __syncthreads();
    }
    tc_cp_wait<0>();
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int row = r0 + 8 * i;
        if (row >= tile.y) continue;
        float* dst = dqkv + (long long)(tile.x + row) * W + h * HS + 2 * t;
#pragma unroll
        for (int d = 0; d < HS / 8; d++) {
            dst[d * 8] = dq[d][2 * i] * scale;
            dst[d * 8 + 1] = dq[d][2 * i + 1] * scale;
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) attention_tc_bwd64(float* dqkv, float* part, const bf16* q, const bf16* k,
                                                                  const bf16* v, const bf16* dob, const float* lse,
                                                                  const float* Dbuf, const int4* tiles, int W, int T, int NH,
                                                                  int KVH, float scale, int pairs) {
    attention_tc_bwd_t<64, false, 4>(dqkv, part, q, k, v, dob, lse, Dbuf, tiles, W, T, NH, KVH, scale, pairs);
}
extern "C" __global__ void __launch_bounds__(128) attention_tc_bwd128(float* dqkv, float* part, const bf16* q, const bf16* k,
                                                                  const bf16* v, const bf16* dob, const float* lse,
                                                                  const float* Dbuf, const int4* tiles, int W, int T, int NH,
                                                                  int KVH, float scale, int pairs) {
    attention_tc_bwd_t<128, false, 4>(dqkv, part, q, k, v, dob, lse, Dbuf, tiles, W, T, NH, KVH, scale, pairs);
}
extern "C" __global__ void __launch_bounds__(128) attention_tc_bwd64_det(float* dqkv, float* part, const bf16* q, const bf16* k,
                                                                  const bf16* v, const bf16* dob, const float* lse,
                                                                  const float* Dbuf, const int4* tiles, int W, int T, int NH,
                                                                  int KVH, float scale, int pairs) {
    attention_tc_bwd_t<64, true, 4>(dqkv, part, q, k, v, dob, lse, Dbuf, tiles, W, T, NH, KVH, scale, pairs);
}
extern "C" __global__ void __launch_bounds__(128) attention_tc_bwd128_det(float* dqkv, float* part, const bf16* q, const bf16* k,
                                                                  const bf16* v, const bf16* dob, const float* lse,
                                                                  const float* Dbuf, const int4* tiles, int W, int T, int NH,
                                                                  int KVH, float scale, int pairs) {
    attention_tc_bwd_t<128, true, 4>(dqkv, part, q, k, v, dob, lse, Dbuf, tiles, W, T, NH, KVH, scale, pairs);
}

extern "C" __global__ void __launch_bounds__(256) attention_tc_bwd64_k128(float* dqkv, float* part, const bf16* q, const bf16* k,
                                                                  const bf16* v, const bf16* dob, const float* lse,
                                                                  const float* Dbuf, const int4* tiles, int W, int T, int NH,
                                                                  int KVH, float scale, int pairs) {
    attention_tc_bwd_t<64, false, 8>(dqkv, part, q, k, v, dob, lse, Dbuf, tiles, W, T, NH, KVH, scale, pairs);
}
extern "C" __global__ void __launch_bounds__(256) attention_tc_bwd128_k128(float* dqkv, float* part, const bf16* q, const bf16* k,
                                                                  const bf16* v, const bf16* dob, const float* lse,
                                                                  const float* Dbuf, const int4* tiles, int W, int T, int NH,
                                                                  int KVH, float scale, int pairs) {
    attention_tc_bwd_t<128, false, 8>(dqkv, part, q, k, v, dob, lse, Dbuf, tiles, W, T, NH, KVH, scale, pairs);
}
extern "C" __global__ void __launch_bounds__(128) attention_tc_dq64(float* dqkv, const bf16* q, const bf16* k, const bf16* v,
                                                                  const bf16* dob, const float* lse, const float* Dbuf,
                                                                  const int4* tiles, int W, int T, int NH, int KVH, float scale) {
    attention_tc_dq_t<64>(dqkv, q, k, v, dob, lse, Dbuf, tiles, W, T, NH, KVH, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_tc_dq128(float* dqkv, const bf16* q, const bf16* k, const bf16* v,
                                                                  const bf16* dob, const float* lse, const float* Dbuf,
                                                                  const int4* tiles, int W, int T, int NH, int KVH, float scale) {
    attention_tc_dq_t<128>(dqkv, q, k, v, dob, lse, Dbuf, tiles, W, T, NH, KVH, scale);
}

// attention_tc_dkv_sum writes the deterministic path's dK and dV: for each
// row, key-value head and column, the group's per-head shares (part: dK
// [NH][T][HS], then dV) summed in head order.
extern "C" __global__ void __launch_bounds__(256) attention_tc_dkv_sum(float* dqkv, const float* part, int T, int NH, int KVH,
                                                                       int HS, int W) {
    int group = NH / KVH;
    long long n = (long long)T * KVH * HS;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        int d = (int)(i % HS);
        long long r = i / HS;
        int kvh = (int)(r % KVH), row = (int)(r / KVH);
        float sk = 0.0f, sv = 0.0f;
        for (int h = kvh * group; h < (kvh + 1) * group; h++) {
            long long j = ((long long)h * T + row) * HS + d;
            sk += part[j];
            sv += part[(long long)NH * T * HS + j];
        }
        dqkv[(long long)row * W + (NH + kvh) * HS + d] = sk;
        dqkv[(long long)row * W + (NH + KVH + kvh) * HS + d] = sv;
    }
}
