// Host emulation of the CUDA device builtins the r1go kernels use, so that
// kernels/*.cu compile with g++ and run on a CPU: each CUDA thread of a
// block is a fiber (its own stack, runtime.cc) on one OS thread, switched at barriers, and
// blocks run one after another. A barrier that not every live thread of
// its block or warp reaches is reported as a deadlock. It exists to test
// the kernels' logic, and the Go launchers' argument order, on machines
// without a GPU; it says nothing about their speed. See build.py.
#pragma once
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>

struct uint3 { unsigned int x, y, z; };
struct int4 { int x, y, z, w; };
struct int2 { int x, y; };

extern uint3 threadIdx, blockIdx, blockDim, gridDim;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static

void* emu_smem();                   // this block's dynamic shared memory
void emu_syncthreads();             // block barrier
void emu_warp_sync();               // barrier of the calling thread's warp
void* emu_warp_slot(int lane);      // 8-byte exchange slot of a lane of the calling warp

inline void __syncthreads() { emu_syncthreads(); }

template <class T> inline T emu_shfl(T v, int src) {
    int lane = threadIdx.x & 31;
    std::memcpy(emu_warp_slot(lane), &v, sizeof(T));
    emu_warp_sync();
    T out;
    std::memcpy(&out, emu_warp_slot(src & 31), sizeof(T));
    emu_warp_sync();
    return out;
}
template <class T> inline T __shfl_xor_sync(unsigned, T v, int o) { return emu_shfl(v, (int)(threadIdx.x & 31) ^ o); }
template <class T> inline T __shfl_sync(unsigned, T v, int src) { return emu_shfl(v, src); }

inline float __uint_as_float(unsigned int u) { float f; std::memcpy(&f, &u, 4); return f; }
inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned int __float_as_uint(float f) { unsigned int u; std::memcpy(&u, &f, 4); return u; }

inline float atomicAdd(float* p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }
inline double atomicAdd(double* p, double v) { return std::atomic_ref<double>(*p).fetch_add(v); }

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
#include <math.h>
inline void sincos(double a, double* s, double* c) { *s = std::sin(a); *c = std::cos(a); }
