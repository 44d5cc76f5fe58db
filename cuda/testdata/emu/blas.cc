// The emulated cuBLAS of the CUDA emulator (runtime.cc is its libcuda):
// GEMM only, by the column-major BLAS definition, in double, float32 or
// bf16 operands and float32 or bf16 results. Calls made while a stream is
// captured are recorded into the graph (emu_record_call) and run at replay.
#include <cstddef>
#include <cstring>
#include <functional>
#include <vector>

extern "C" bool emu_record_call(std::function<void()> fn);

extern "C" {
int cublasCreate_v2(void** h) { *h = (void*)5; return 0; }
int cublasDestroy_v2(void*) { return 0; }
int cublasSetStream_v2(void*, void*) { return 0; }
// The emulated GEMM needs no workspace: the Device's is accepted and unused.
int cublasSetWorkspace_v2(void*, void*, size_t) { return 0; }
const char* cublasGetStatusName(int) { return "CUBLAS_STATUS_EMULATED"; }
static void gemm_run(int opA, int opB, int m, int n, int k, float al, const void* A, int at, int lda,
                     const void* B, int bt, int ldb, float be, void* C, int ct, int ldc);
int cublasGemmEx(void*, int opA, int opB, int m, int n, int k, const void* alpha, const void* A, int at, int lda,
                 const void* B, int bt, int ldb, const void* beta, void* C, int ct, int ldc, int, int) {
    // float32 (0) or bf16 (14) operands, float32 accumulation in double.
    if ((at != 0 && at != 14) || bt != at || (ct != 0 && ct != 14)) return 15; // CUBLAS_STATUS_NOT_SUPPORTED
    float al = *(const float*)alpha, be = *(const float*)beta;
    // Recorded with its scalars by value, as cuBLAS records into a graph.
    if (emu_record_call([=] { gemm_run(opA, opB, m, n, k, al, A, at, lda, B, bt, ldb, be, C, ct, ldc); })) return 0;
    gemm_run(opA, opB, m, n, k, al, A, at, lda, B, bt, ldb, be, C, ct, ldc);
    return 0;
}
}

static void gemm_run(int opA, int opB, int m, int n, int k, float al, const void* A, int at, int lda,
                     const void* B, int bt, int ldb, float be, void* C, int ct, int ldc) {
    auto load = [](const void* p, int t, long i) -> double {
        if (t == 0) return ((const float*)p)[i];
        unsigned u = (unsigned)((const unsigned short*)p)[i] << 16;
        float f; memcpy(&f, &u, 4); return f;
    };
    // op(A) as rows of k and op(B) as columns of k, in double, so the
    // inner product reads contiguous memory.
    std::vector<double> a((size_t)m * k), b((size_t)n * k);
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++) a[(size_t)i * k + p] = opA == 0 ? load(A, at, i + (long)p * lda) : load(A, at, p + (long)i * lda);
    for (int j = 0; j < n; j++)
        for (int p = 0; p < k; p++) b[(size_t)j * k + p] = opB == 0 ? load(B, bt, p + (long)j * ldb) : load(B, bt, j + (long)p * ldb);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            const double *x = &a[(size_t)i * k], *y = &b[(size_t)j * k];
            double s = 0;
            for (int p = 0; p < k; p++) s += x[p] * y[p];
            long ci = i + (long)j * ldc;
            double v = al * s;
            if (be != 0) v += be * load(C, ct, ci);
            float f = (float)v;
            if (ct == 0) { ((float*)C)[ci] = f; continue; }
            unsigned u; memcpy(&u, &f, 4);                 // round to nearest even, as the GPU does
            if ((u & 0x7fffffffu) > 0x7f800000u) u = (u >> 16) | 0x40u; else u = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
            ((unsigned short*)C)[ci] = (unsigned short)u;
        }
}

