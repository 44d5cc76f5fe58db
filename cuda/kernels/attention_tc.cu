// Causal grouped-query attention over packed sequences on the tensor cores,
// for bf16 q|k|v (mixed precision's storage), head sizes 64 and 128:
// flash attention with bf16 operands, float32 accumulation, an online
// softmax in log2 units, and the log-sum-exp saved for the backward (natural
// log, as attention.cu saves it). The CUDA-core kernels of attention.cu stay
// for float32 storage, other head sizes and GPUs older than sm_80.
//
// Forward: a block of 4 warps owns BM = 64·MT query rows of one head, each
// warp MT m16 row tiles; keys and values stream through shared memory BN
// rows at a time (cp.async, double-buffered); S = Q·Kᵀ and O += P·V are
// m16n8k16 products with operands from ldmatrix, and P goes from the S
// accumulators into the A fragments of P·V without leaving registers (the
// accumulator layout is the A layout). Tiles as in attention.cu: x = first
// query row, y = rows, z = first key row of the sequence, w = keys the first
// row sees; the host orders them heaviest first, so the longest blocks do
// not start last.
// The backward is in attention_tc_bwd.cu, the shared helpers in flash.cuh.
#include "flash.cuh"

template <int HS, int MT, int BN>
__device__ __forceinline__ void attention_tc_fwd_t(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                                                   const int4* tiles, int ldq, int ldkv, int ldo, int T, int NH, int KVH,
                                                   float scale) {
    constexpr int BM = 16 * MT * FA_WARPS;
    extern __shared__ float smem[];
    bf16* Qs = (bf16*)smem;        // [BM][HS]
    bf16* Ks = Qs + BM * HS;       // [2][BN][HS]
    bf16* Vs = Ks + 2 * BN * HS;   // [2][BN][HS]
    int4 tile = tiles[blockIdx.x];
    int h = blockIdx.y, kvh = h / (NH / KVH);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int nkAll = tile.w + tile.y - 1; // keys the block's last row sees
    int ntiles = (nkAll + BN - 1) / BN;
    const bf16* kb = k + (long long)tile.z * ldkv + kvh * HS;
    const bf16* vb = v + (long long)tile.z * ldkv + kvh * HS;

    fa_load_rows<HS, BM>(Qs, q + (long long)tile.x * ldq + h * HS, ldq, tile.y);
    fa_load_rows<HS, BN>(Ks, kb, ldkv, nkAll);
    fa_load_rows<HS, BN>(Vs, vb, ldkv, nkAll);
    tc_cp_commit();

    const float sl2 = scale * FA_LOG2E; // scores in log2 units
    float m[MT][2], l[MT][2], o[MT][HS / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        m[mt][0] = m[mt][1] = NEG_INF;
        l[mt][0] = l[mt][1] = 0.0f;
#pragma unroll
        for (int d = 0; d < HS / 8; d++) o[mt][d][0] = o[mt][d][1] = o[mt][d][2] = o[mt][d][3] = 0.0f;
    }

    for (int j = 0; j < ntiles; j++) {
        int buf = j & 1;
        if (j + 1 < ntiles) { // the next tile into the other buffer, while this one is used
            int k0 = (j + 1) * BN;
            fa_load_rows<HS, BN>(Ks + (buf ^ 1) * BN * HS, kb + (long long)k0 * ldkv, ldkv, nkAll - k0);
            fa_load_rows<HS, BN>(Vs + (buf ^ 1) * BN * HS, vb + (long long)k0 * ldkv, ldkv, nkAll - k0);
        }
        tc_cp_commit();
        tc_cp_wait<1>(); // every group but the one just issued: tile j (and Q) landed
        __syncthreads();
        const bf16* Kt = Ks + buf * BN * HS;
        const bf16* Vt = Vs + buf * BN * HS;
        int kbase = j * BN;
        // Row r sees keys below tile.w + r. With two row tiles a warp, one
        // whose last row sees none of this key tile skips it (warp-uniform;
        // with one the test costs a fifth more registers than it saves); a
        // row tile whose first row does not see all of it masks.
        bool live[MT], edge[MT];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            int r0 = (warp * MT + mt) * 16;
            live[mt] = MT == 1 || (kbase < tile.w + r0 + 15 && r0 < tile.y);
            edge[mt] = kbase + BN > tile.w + r0;
        }
        float s[MT][BN / 8][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int n = 0; n < BN / 8; n++) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
        // S = Q·Kᵀ: each K fragment serves all MT row tiles.
#pragma unroll
        for (int kk = 0; kk < HS / 16; kk++) {
            u32 qa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                if (live[mt]) fa_frag_a<HS>(qa[mt], Qs, (warp * MT + mt) * 16, kk * 16);
#pragma unroll
            for (int n = 0; n < BN / 8; n += 2) {
                u32 b[4];
                fa_frag_b_rows<HS>(b, Kt, n * 8, kk * 16);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    if (!live[mt]) continue;
                    tc_mma_bf16(s[mt][n], qa[mt], b);
                    tc_mma_bf16(s[mt][n + 1], qa[mt], b + 2);
                }
            }
        }
        // Online softmax: this thread holds rows g and g + 8 of each row tile.
        u32 pa[MT][BN / 16][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            if (!live[mt]) continue;
            int r0 = (warp * MT + mt) * 16 + g;
            if (edge[mt]) {
#pragma unroll
                for (int n = 0; n < BN / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        if (kbase + n * 8 + 2 * t + (e & 1) >= tile.w + r0 + (e >> 1) * 8) s[mt][n][e] = NEG_INF;
            }
            float corr[2], msub[2];
#pragma unroll
            for (int i = 0; i < 2; i++) {
                float mx = NEG_INF;
#pragma unroll
                for (int n = 0; n < BN / 8; n++) mx = fmaxf(mx, fmaxf(s[mt][n][2 * i], s[mt][n][2 * i + 1]));
                float mn = fmaxf(m[mt][i], fa_quad_max(mx) * sl2);
                // A row that has seen no key keeps m = -inf: nothing to rescale, p = 0.
                corr[i] = mn == NEG_INF ? 1.0f : tc_exp2(m[mt][i] - mn);
                msub[i] = mn == NEG_INF ? 0.0f : mn;
                m[mt][i] = mn;
                l[mt][i] *= corr[i];
            }
#pragma unroll
            for (int d = 0; d < HS / 8; d++) {
                o[mt][d][0] *= corr[0];
                o[mt][d][1] *= corr[0];
                o[mt][d][2] *= corr[1];
                o[mt][d][3] *= corr[1];
            }
#pragma unroll
            for (int n = 0; n < BN / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float p = tc_exp2(fmaf(s[mt][n][e], sl2, -msub[e >> 1]));
                    s[mt][n][e] = p;
                    l[mt][e >> 1] += p;
                }
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++) fa_pack_a(pa[mt][kk], s[mt][2 * kk], s[mt][2 * kk + 1]);
        }
        // O += P·V: each V fragment serves all MT row tiles.
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
#pragma unroll
            for (int d = 0; d < HS / 8; d += 2) {
                u32 b[4];
                fa_frag_b_cols<HS>(b, Vt, kk * 16, d * 8);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    if (!live[mt]) continue;
                    tc_mma_bf16(o[mt][d], pa[mt][kk], b);
                    tc_mma_bf16(o[mt][d + 1], pa[mt][kk], b + 2);
                }
            }
        }
        __syncthreads(); // the next iteration's copies refill this buffer
    }
    tc_cp_wait<0>();
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int row = (warp * MT + mt) * 16 + g + 8 * i;
            float li = fa_quad_sum(l[mt][i]);
            if (row >= tile.y) continue;
            float inv = 1.0f / li;
            long long tq = tile.x + row;
#pragma unroll
            for (int d = 0; d < HS / 8; d++)
                *(u32*)&out[tq * ldo + h * HS + d * 8 + 2 * t] = tc_pack_bf16x2(o[mt][d][2 * i] * inv, o[mt][d][2 * i + 1] * inv);
            if (lse != 0 && t == 0) lse[(long long)h * T + tq] = (m[mt][i] + log2f(li)) * FA_LN2;
        }
    }
}

// The shapes the launcher chooses among (attention_tc.go, tcForwards):
// head size, row tiles a warp, keys a tile.
extern "C" __global__ void __launch_bounds__(128) attention_tc_fwd64(bf16* out, float* lse, const bf16* q, const bf16* k,
                                                                  const bf16* v, const int4* tiles, int ldq, int ldkv, int ldo,
                                                                  int T, int NH, int KVH, float scale) {
    attention_tc_fwd_t<64, 1, 64>(out, lse, q, k, v, tiles, ldq, ldkv, ldo, T, NH, KVH, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_tc_fwd64_n128(bf16* out, float* lse, const bf16* q, const bf16* k,
                                                                  const bf16* v, const int4* tiles, int ldq, int ldkv, int ldo,
                                                                  int T, int NH, int KVH, float scale) {
    attention_tc_fwd_t<64, 1, 128>(out, lse, q, k, v, tiles, ldq, ldkv, ldo, T, NH, KVH, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_tc_fwd64_m2(bf16* out, float* lse, const bf16* q, const bf16* k,
                                                                  const bf16* v, const int4* tiles, int ldq, int ldkv, int ldo,
                                                                  int T, int NH, int KVH, float scale) {
    attention_tc_fwd_t<64, 2, 64>(out, lse, q, k, v, tiles, ldq, ldkv, ldo, T, NH, KVH, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_tc_fwd128(bf16* out, float* lse, const bf16* q, const bf16* k,
                                                                  const bf16* v, const int4* tiles, int ldq, int ldkv, int ldo,
                                                                  int T, int NH, int KVH, float scale) {
    attention_tc_fwd_t<128, 1, 64>(out, lse, q, k, v, tiles, ldq, ldkv, ldo, T, NH, KVH, scale);
}
extern "C" __global__ void __launch_bounds__(128) attention_tc_fwd128_n128(bf16* out, float* lse, const bf16* q, const bf16* k,
                                                                  const bf16* v, const int4* tiles, int ldq, int ldkv, int ldo,
                                                                  int T, int NH, int KVH, float scale) {
    attention_tc_fwd_t<128, 1, 128>(out, lse, q, k, v, tiles, ldq, ldkv, ldo, T, NH, KVH, scale);
}

