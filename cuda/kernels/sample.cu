// Sampling one token per row of logits on the GPU, so a decode step moves
// a token id and its logprob to the host instead of a row of V logits.
// Temperature sampling uses the Gumbel-max trick: argmax_v(z_v/T + G_v)
// with G_v = −log(−log U_v) is distributed as softmax(z/T), so a sample
// is one pass and a reduction, no sort. U_v comes from a counter-based
// hash of (seed, row, v): rows and steps draw independent numbers without
// any RNG state on the device. Greedy decoding (T = 0) is the argmax, ties
// to the lowest id, with logprob 0, as model.SampleToken does.
#include "common.cuh"

__device__ __forceinline__ unsigned long long mix64(unsigned long long x) {
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27; x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

// uniform in (0, 1), never 0 or 1: 24 random bits, offset by half a step.
__device__ __forceinline__ float uniform01(unsigned long long seed, int row, int v) {
    unsigned long long h = mix64(seed ^ mix64(((unsigned long long)row << 32) | (unsigned int)v));
    return ((float)(h >> 40) + 0.5f) * (1.0f / 16777216.0f);
}

// One block per row. invT = 1/T; greedy when invT == 0.
extern "C" __global__ void __launch_bounds__(1024) sample_rows(int* tokens, float* logprobs, const float* logits, int V, float invT,
                                       unsigned long long seed) {
    __shared__ float skey[32], sm[32], ss[32];
    __shared__ int sidx[32];
    int row = blockIdx.x;
    const float* z = logits + (long long)row * V;
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
