// The emulated libcuda and libcublas: just the entry points package cuda
// binds, over host memory, running kernels from the registry that build.py
// generates. Launches run synchronously; a stream is a no-op; graph capture
// records launches and replays them.
#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>
#include "cuda_emu.h"

thread_local uint3 threadIdx, blockIdx, blockDim, gridDim;

struct KernelEntry { const char* name; void (*invoke)(void**); int arity; };
extern KernelEntry emu_kernels[];
extern int emu_num_kernels;

// A barrier whose participants may leave (a thread that returns early).
struct Barrier {
    std::mutex mu; std::condition_variable cv;
    int want = 0, arrived = 0; unsigned long gen = 0;
    void reset(int n) { want = n; arrived = 0; }
    void wait() {
        std::unique_lock<std::mutex> l(mu);
        unsigned long g = gen;
        if (++arrived == want) { arrived = 0; gen++; cv.notify_all(); return; }
        cv.wait(l, [&] { return gen != g; });
    }
    void drop() {
        std::unique_lock<std::mutex> l(mu);
        want--;
        if (want > 0 && arrived == want) { arrived = 0; gen++; cv.notify_all(); }
    }
};

struct BlockState {
    std::vector<unsigned char> smem;
    Barrier block;
    std::vector<Barrier> warps;
    std::vector<uint64_t> slots; // 32 per warp
};
static BlockState* cur;
thread_local int emu_tid;

void* emu_smem() { return cur->smem.data(); }
void emu_syncthreads() { cur->block.wait(); }
void emu_warp_sync() { cur->warps[emu_tid / 32].wait(); }
void* emu_warp_slot(int lane) { return &cur->slots[(emu_tid / 32) * 32 + lane]; }

static void run_launch(KernelEntry* k, int gx, int gy, int gz, int bx, int by, int bz, int smem, void** params) {
    int n = bx * by * bz;
    BlockState st;
    cur = &st;
    st.warps = std::vector<Barrier>((n + 31) / 32);
    st.slots.assign(((n + 31) / 32) * 32, 0);
    for (int z = 0; z < gz; z++) for (int y = 0; y < gy; y++) for (int x = 0; x < gx; x++) {
        st.smem.assign(smem + 16, 0xff); // NaN-filled: reading unwritten shared memory shows
        st.block.reset(n);
        for (size_t w = 0; w < st.warps.size(); w++) st.warps[w].reset(std::min(32, n - (int)w * 32));
        std::vector<std::thread> ts;
        ts.reserve(n);
        for (int t = 0; t < n; t++) {
            ts.emplace_back([=, &st] {
                emu_tid = t;
                threadIdx = {(unsigned)(t % bx), (unsigned)(t / bx % by), (unsigned)(t / (bx * by))};
                blockIdx = {(unsigned)x, (unsigned)y, (unsigned)z};
                blockDim = {(unsigned)bx, (unsigned)by, (unsigned)bz};
                gridDim = {(unsigned)gx, (unsigned)gy, (unsigned)gz};
                k->invoke(params);
                st.warps[t / 32].drop();
                st.block.drop();
            });
        }
        for (auto& th : ts) th.join();
    }
}

struct Recorded { KernelEntry* k; int g[3], b[3], smem; std::vector<uint64_t> vals; };
static bool capturing = false;
static std::vector<Recorded>* recording;

extern "C" {
typedef int CUresult;
CUresult cuInit(unsigned) { return 0; }
CUresult cuDriverGetVersion(int* v) { *v = 12050; return 0; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return 0; }
CUresult cuDeviceGet(int* d, int o) { *d = o; return o == 0 ? 0 : 101; }
CUresult cuDeviceGetAttribute(int* v, int attr, int) {
    switch (attr) {
    case 75: *v = 9; break;      // compute capability major
    case 76: *v = 0; break;      // minor
    case 16: *v = 2; break;      // SMs: small grids keep the emulation quick
    case 97: *v = 232448; break; // shared memory per block, opt-in
    default: *v = 0;
    }
    return 0;
}
CUresult cuDeviceGetName(char* s, int n, int) { snprintf(s, n, "r1go CUDA emulator"); return 0; }
CUresult cuDeviceTotalMem_v2(size_t* b, int) { *b = 1ull << 34; return 0; }
CUresult cuDevicePrimaryCtxRetain(void** c, int) { *c = (void*)1; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int) { return 0; }
CUresult cuCtxSetCurrent(void*) { return 0; }
CUresult cuCtxSynchronize() { return 0; }
CUresult cuStreamCreate(void** s, unsigned) { *s = (void*)2; return 0; }
CUresult cuStreamSynchronize(void*) { return capturing ? 900 : 0; }
CUresult cuStreamDestroy_v2(void*) { return 0; }
CUresult cuMemAlloc_v2(uint64_t* p, size_t n) {
    void* m = aligned_alloc(256, (n + 255) / 256 * 256);
    if (!m) return 2;
    memset(m, 0xff, n); // NaN-filled: reading memory nobody wrote shows
    *p = (uint64_t)m;
    return 0;
}
CUresult cuMemFree_v2(uint64_t p) { if (capturing) return 900; free((void*)p); return 0; }
CUresult cuMemGetInfo_v2(size_t* f, size_t* t) { *f = *t = 1ull << 34; return 0; }
CUresult cuMemcpyHtoDAsync_v2(uint64_t d, const void* s, size_t n, void*) { if (capturing) return 900; memcpy((void*)d, s, n); return 0; }
CUresult cuMemcpyDtoHAsync_v2(void* d, uint64_t s, size_t n, void*) { if (capturing) return 900; memcpy(d, (void*)s, n); return 0; }
CUresult cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s, size_t n, void*) { memmove((void*)d, (void*)s, n); return 0; }
CUresult cuMemsetD32Async(uint64_t d, unsigned v, size_t n, void*) {
    unsigned* p = (unsigned*)d;
    for (size_t i = 0; i < n; i++) p[i] = v;
    return 0;
}
CUresult cuModuleLoadData(void** m, const void*) { *m = (void*)3; return 0; }
CUresult cuModuleGetFunction(void** f, void*, const char* name) {
    for (int i = 0; i < emu_num_kernels; i++)
        if (std::string(emu_kernels[i].name) == name) { *f = &emu_kernels[i]; return 0; }
    return 500; // CUDA_ERROR_NOT_FOUND
}
CUresult cuModuleUnload(void*) { return 0; }
CUresult cuFuncSetAttribute(void*, int, int) { return 0; }
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, void*, void** params, void**) {
    KernelEntry* k = (KernelEntry*)f;
    if (bx * by * bz > 1024 || bx * by * bz == 0) return 1; // CUDA_ERROR_INVALID_VALUE
    if (capturing) {
        Recorded r{k, {(int)gx, (int)gy, (int)gz}, {(int)bx, (int)by, (int)bz}, (int)smem, {}};
        for (int i = 0; i < k->arity; i++) r.vals.push_back(*(uint64_t*)params[i]);
        recording->push_back(r);
        return 0;
    }
    run_launch(k, gx, gy, gz, bx, by, bz, smem, params);
    return 0;
}
CUresult cuGetErrorName(int e, const char** s) { static char b[32]; snprintf(b, 32, "EMU_ERROR_%d", e); *s = b; return 0; }
CUresult cuGetErrorString(int, const char** s) { *s = "emulated CUDA error"; return 0; }
CUresult cuEventCreate(void** e, unsigned) { *e = (void*)4; return 0; }
CUresult cuEventRecord(void*, void*) { return 0; }
CUresult cuEventSynchronize(void*) { return 0; }
CUresult cuEventElapsedTime_v2(float* ms, void*, void*) { *ms = 0; return 0; }
CUresult cuEventDestroy_v2(void*) { return 0; }
CUresult cuStreamBeginCapture_v2(void*, int) { capturing = true; recording = new std::vector<Recorded>; return 0; }
CUresult cuStreamEndCapture(void*, void** g) { capturing = false; *g = recording; recording = nullptr; return 0; }
CUresult cuGraphInstantiateWithFlags(void** e, void* g, unsigned long long) { *e = g; return 0; }
CUresult cuGraphLaunch(void* e, void*) {
    for (auto& r : *(std::vector<Recorded>*)e) {
        std::vector<void*> ps;
        for (auto& v : r.vals) ps.push_back(&v);
        run_launch(r.k, r.g[0], r.g[1], r.g[2], r.b[0], r.b[1], r.b[2], r.smem, ps.data());
    }
    return 0;
}
CUresult cuGraphExecDestroy(void*) { return 0; }
CUresult cuGraphDestroy(void* g) { delete (std::vector<Recorded>*)g; return 0; }

// cuBLAS: GEMM only, by the column-major BLAS definition, in double.
int cublasCreate_v2(void** h) { *h = (void*)5; return 0; }
int cublasDestroy_v2(void*) { return 0; }
int cublasSetStream_v2(void*, void*) { return 0; }
const char* cublasGetStatusName(int) { return "CUBLAS_STATUS_EMULATED"; }
int cublasGemmEx(void*, int opA, int opB, int m, int n, int k, const void* alpha, const void* A, int at, int lda,
                 const void* B, int bt, int ldb, const void* beta, void* C, int ct, int ldc, int, int) {
    if (at != 0 || bt != 0 || ct != 0) return 15; // CUBLAS_STATUS_NOT_SUPPORTED: float32 only
    if (capturing) return 14;
    const float *a = (const float*)A, *b = (const float*)B;
    float* c = (float*)C;
    float al = *(const float*)alpha, be = *(const float*)beta;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int p = 0; p < k; p++) {
                double x = opA == 0 ? a[i + (long)p * lda] : a[p + (long)i * lda];
                double y = opB == 0 ? b[p + (long)j * ldb] : b[j + (long)p * ldb];
                s += x * y;
            }
            double v = al * s;
            if (be != 0) v += be * c[i + (long)j * ldc];
            c[i + (long)j * ldc] = (float)v;
        }
    return 0;
}
}
