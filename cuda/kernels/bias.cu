// Bias of a linear layer: add to the first cols columns of every row, and
// its backward, the column sums of the gradient (accumulated, +=).
#include "common.cuh"

// B is the bias's storage: float, or bf16 for a frozen model stored in bf16.
// O is the output's: float, or bf16 for a projection output stored in bf16
// under mixed precision (the sum taken in float, rounded once more).
template <typename O, typename B>
__device__ __forceinline__ void bias_forward_t(O* out, int ldo, const B* bias, int rows, int cols) {
    long long n = (long long)rows * cols;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        long long r = i / cols;
        int c = (int)(i - r * cols);
        store_f(out, r * ldo + c, load_f(out, r * ldo + c) + load_f(bias, c));
    }
}

extern "C" __global__ void __launch_bounds__(256) bias_forward(float* out, int ldo, const float* bias, int rows, int cols) {
    bias_forward_t(out, ldo, bias, rows, cols);
}

extern "C" __global__ void __launch_bounds__(256) bias_forward_bf16(float* out, int ldo, const bf16* bias, int rows, int cols) {
    bias_forward_t(out, ldo, bias, rows, cols);
}

extern "C" __global__ void __launch_bounds__(256) bias_forward_obf16(bf16* out, int ldo, const float* bias, int rows, int cols) {
    bias_forward_t(out, ldo, bias, rows, cols);
}

extern "C" __global__ void __launch_bounds__(256) bias_forward_bf16_obf16(bf16* out, int ldo, const bf16* bias, int rows, int cols) {
    bias_forward_t(out, ldo, bias, rows, cols);
}

// Block (32, 8): threadIdx.x picks a column of a 32-column strip (so a warp
// reads 32 consecutive floats of a row), threadIdx.y a stripe of rows.
extern "C" __global__ void __launch_bounds__(256) bias_backward(float* dbias, const float* dout, int ldo, int rows, int cols) {
    __shared__ float part[8][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (c < cols) {
        for (int r = threadIdx.y; r < rows; r += 8) s += dout[(long long)r * ldo + c];
    }
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float t = 0.0f;
        for (int y = 0; y < 8; y++) t += part[y][threadIdx.x];
        dbias[c] += t;
    }
}
