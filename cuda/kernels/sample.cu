// Sampling one token per row of logits on the GPU, so a decode step moves
// a token id and its logprob to the host instead of a row of V logits.
// Temperature sampling uses the Gumbel-max trick: argmax_v(z_v/T + G_v)
// with G_v = −log(−log U_v) is distributed as softmax(z/T), so a sample
// is one pass and a reduction, no sort. U_v comes from a counter-based
// hash of (seed, row, v): rows and steps draw independent numbers without
// any RNG state on the device. Greedy decoding (T = 0) is the argmax, ties
// to the lowest id, with logprob 0, as model.SampleToken does.
#include "common.cuh"

// uniform in (0, 1), never 0 or 1: 24 random bits, offset by half a step.
__device__ __forceinline__ float uniform01(unsigned long long seed, int row, int v) {
    unsigned long long h = mix64(seed ^ mix64(((unsigned long long)row << 32) | (unsigned int)v));
    return ((float)(h >> 40) + 0.5f) * (1.0f / 16777216.0f);
}

// One block per row. invT = 1/T; greedy when invT == 0.
// seeds, when not null, holds one seed per row (replacing seed).
extern "C" __global__ void __launch_bounds__(1024) sample_rows(int* tokens, float* logprobs, const float* logits, int V, float invT,
                                       unsigned long long seed, const unsigned long long* seeds) {
    __shared__ float skey[32], sm[32], ss[32];
    __shared__ int sidx[32];
    int row = blockIdx.x;
    const float* z = logits + (long long)row * V;
    if (seeds) seed = seeds[row];
    bool greedy = invT == 0.0f;
    float bestKey = NEG_INF, m = NEG_INF, s = 0.0f;
    int best = 0x7fffffff;
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        float x = greedy ? z[v] : z[v] * invT;
        float key = x;
        if (!greedy) {
            key = x - logf(-logf(uniform01(seed, row, v)));
            // Online log-sum-exp of x for the logprob.
            if (x > m) { s = s * expf(m - x) + 1.0f; m = x; } else { s += expf(x - m); }
        }
        if (key > bestKey || (key == bestKey && v < best)) { bestKey = key; best = v; }
    }
    // Warp then block reduction of (key, index) and (max, sum).
    for (int o = 16; o > 0; o >>= 1) {
        float k2 = __shfl_xor_sync(0xffffffffu, bestKey, o);
        int i2 = __shfl_xor_sync(0xffffffffu, best, o);
        if (k2 > bestKey || (k2 == bestKey && i2 < best)) { bestKey = k2; best = i2; }
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        float mn = fmaxf(m, m2);
        s = (m == NEG_INF ? 0.0f : s * expf(m - mn)) + (m2 == NEG_INF ? 0.0f : s2 * expf(m2 - mn));
        m = mn;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) { skey[warp] = bestKey; sidx[warp] = best; sm[warp] = m; ss[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        bestKey = lane < nw ? skey[lane] : NEG_INF;
        best = lane < nw ? sidx[lane] : 0x7fffffff;
        m = lane < nw ? sm[lane] : NEG_INF;
        s = lane < nw ? ss[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) {
            float k2 = __shfl_xor_sync(0xffffffffu, bestKey, o);
            int i2 = __shfl_xor_sync(0xffffffffu, best, o);
            if (k2 > bestKey || (k2 == bestKey && i2 < best)) { bestKey = k2; best = i2; }
            float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
            float mn = fmaxf(m, m2);
            s = (m == NEG_INF ? 0.0f : s * expf(m - mn)) + (m2 == NEG_INF ? 0.0f : s2 * expf(m2 - mn));
            m = mn;
        }
        if (lane == 0) {
            tokens[row] = best;
            logprobs[row] = greedy ? 0.0f : z[best] * invT - (m + logf(s));
        }
    }
}

// Truncated sampling (top-k and/or top-p), the distribution of
// model.SampleToken: candidates sorted by logit, descending, ties to the
// lower id; the first k; of those, the shortest prefix whose probability
// mass (under softmax(z/T) over the whole vocabulary) reaches top_p; then a
// draw from that set in proportion to the probabilities.
//
// Each token gets a 64-bit key, the logit's bits made order-preserving in
// the high word and the inverted id in the low word, so keys are distinct
// and descending key order is the host's sort order. The kept set is then
// every key ≥ a threshold: the k-th largest key, and the largest key t
// with mass(keys ≥ t) ≥ top_p, found by a radix select (one 256-bin
// histogram per byte of the key, in shared memory) instead of a sort. Low
// bytes above the id's width are all ones for every token and are set
// without a pass. Then Gumbel-max over the kept tokens, as in sample_rows.
// The histograms' mass is in fixed point, units of 2⁻⁶²: integer sums are
// the same whichever order the threads add in, where float64 atomic adds
// would round in the order they land, and a token could be kept in one run
// and not the next.
#define SAMPLE_MASS_ONE 4611686018427387904.0 // 2^62

__device__ __forceinline__ unsigned long long sample_key(float z, int v) {
    unsigned int u = __float_as_uint(z);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((unsigned long long)u << 32) | (unsigned long long)(0xffffffffu - (unsigned int)v);
}

// topK ≥ V turns top-k off, topP ≥ 1 top-p; invT > 0.
extern "C" __global__ void __launch_bounds__(1024) sample_rows_truncated(int* tokens, float* logprobs, const float* logits, int V,
                                       float invT, int topK, double topP, unsigned long long seed,
                                       const unsigned long long* seeds) {
    __shared__ int histK[256], histPc[256];
    __shared__ unsigned long long histP[256];
    __shared__ float red[32];
    __shared__ float skey[32];
    __shared__ int sidx[32];
    __shared__ unsigned long long prefK, prefP;
    __shared__ int aboveK, okP;
    __shared__ unsigned long long aboveP;
    int row = blockIdx.x;
    const float* z = logits + (long long)row * V;
    if (seeds) seed = seeds[row];
    bool needK = topK < V, needP = topP < 1.0;
    unsigned long long massP = needP ? (unsigned long long)(topP * SAMPLE_MASS_ONE) : 0ull;

    float m = NEG_INF;
    for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, z[v] * invT);
    m = block_max(m, red);
    float s = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) s += expf(z[v] * invT - m);
    s = block_sum(s, red);
    float lse = m + logf(s);

    if (threadIdx.x == 0) { prefK = 0; prefP = 0; aboveK = 0; aboveP = 0ull; okP = needP ? 1 : 0; }
    int idBits = 1;
    while (idBits < 32 && (1u << idBits) < (unsigned int)V) idBits++;
    for (int sh = 56; sh >= 0 && (needK || needP); sh -= 8) {
        if (sh < 32 && sh >= idBits) { // every token has ones here
            if (threadIdx.x == 0) { prefK |= 0xffull << sh; prefP |= 0xffull << sh; }
            __syncthreads();
            continue;
        }
        for (int d = threadIdx.x; d < 256; d += blockDim.x) { histK[d] = 0; histPc[d] = 0; histP[d] = 0ull; }
        __syncthreads();
        unsigned long long hiMask = sh == 56 ? 0ull : ~0ull << (sh + 8);
        unsigned long long pk = prefK, pp = prefP;
        int ok = okP;
        for (int v = threadIdx.x; v < V; v += blockDim.x) {
            unsigned long long key = sample_key(z[v], v);
            int d = (int)((key >> sh) & 255ull);
            if (needK && (key & hiMask) == pk) atomicAdd(&histK[d], 1);
            if (ok && (key & hiMask) == pp) {
                atomicAdd(&histPc[d], 1);
                atomicAdd(&histP[d], (unsigned long long)((double)expf(z[v] * invT - lse) * SAMPLE_MASS_ONE));
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            if (needK) {
                int cum = aboveK;
                for (int d = 255; d >= 0; d--) {
                    if (cum + histK[d] >= topK) { prefK |= (unsigned long long)d << sh; aboveK = cum; break; }
                    cum += histK[d];
                }
            }
            if (okP) {
                unsigned long long cum = aboveP;
                int found = -1, lowest = -1;
                for (int d = 255; d >= 0; d--) {
                    if (histPc[d] > 0) lowest = d;
                    if (found < 0 && cum + histP[d] >= massP) { found = d; break; }
                    cum += histP[d];
                }
                if (found < 0 && sh == 56) {
                    okP = 0; // the whole vocabulary's mass is below top_p: keep all
                } else {
                    // Past the first byte the region's mass reached top_p
                    // already; a miss is a rounding of the sums: keep the
                    // whole region.
                    if (found < 0) found = lowest < 0 ? 0 : lowest;
                    prefP |= (unsigned long long)found << sh;
                    aboveP = cum;
                }
            }
        }
        __syncthreads();
    }
    unsigned long long thr = 0;
    if (needK) thr = prefK;
    if (okP && prefP > thr) thr = prefP;

    float bestKey = NEG_INF;
    int best = 0x7fffffff;
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        if (sample_key(z[v], v) < thr) continue;
        float key = z[v] * invT - logf(-logf(uniform01(seed, row, v)));
        if (key > bestKey || (key == bestKey && v < best)) { bestKey = key; best = v; }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float k2 = __shfl_xor_sync(0xffffffffu, bestKey, o);
        int i2 = __shfl_xor_sync(0xffffffffu, best, o);
        if (k2 > bestKey || (k2 == bestKey && i2 < best)) { bestKey = k2; best = i2; }
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) { skey[warp] = bestKey; sidx[warp] = best; }
    __syncthreads();
    if (warp == 0) {
        bestKey = lane < nw ? skey[lane] : NEG_INF;
        best = lane < nw ? sidx[lane] : 0x7fffffff;
        for (int o = 16; o > 0; o >>= 1) {
            float k2 = __shfl_xor_sync(0xffffffffu, bestKey, o);
            int i2 = __shfl_xor_sync(0xffffffffu, best, o);
            if (k2 > bestKey || (k2 == bestKey && i2 < best)) { bestKey = k2; best = i2; }
        }
        if (lane == 0) {
            tokens[row] = best;
            logprobs[row] = z[best] * invT - lse;
        }
    }
}
