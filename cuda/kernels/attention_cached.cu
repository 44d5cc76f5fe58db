// Attention against the KV cache, first half: write each packed row's key
// and value into its cache row (slot·maxLen + position). The second half
// is attention_forward of attention.cu, run with the cache as k and v.
#include "common.cuh"

// One thread per (row, column < kvw). dst[t] is the cache row of packed row t.
extern "C" __global__ void __launch_bounds__(256) kv_cache_write(float* kc, float* vc, const float* k, const float* v, const int* dst,
                                          int T, int ldkv, int kvw) {
    long long n = (long long)T * kvw;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {
        long long t = e / kvw;
        int c = (int)(e - t * kvw);
        long long d = (long long)dst[t] * kvw + c;
        kc[d] = k[t * ldkv + c];
        vc[d] = v[t * ldkv + c];
    }
}
