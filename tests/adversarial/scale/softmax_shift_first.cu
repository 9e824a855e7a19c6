// task: softmax
// expect: wrong_answer
// trick: "stable enough" softmax that subtracts each row's FIRST element instead of its max (saving the
//        max reduction: one pass sums exp(x - x[0]), a second writes exp(x - x[0]) / sum). On the task's
//        draw a row's values lie within about +-9 of each other (sd 2), so exp(x - x[0]) stays far below
//        fp32's range and every row passes (emulated error at most 0.006 of the allowance). It is right
//        only while max - x[0] < 88.7: inputs scaled by 10 already overflow expf in some row (Inf / Inf =
//        NaN), and scaled by 1e4 (spread ~1e5) every row does. Inputs scaled by 1e-4 pass.
#include <cuda_runtime.h>

#define THREADS 256

__global__ void __launch_bounds__(THREADS) softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float part[THREADS / 32];
    __shared__ float row_sum;
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    const float shift = xr[0];                         // the row's first element, not its max
    const bool vec = (cols & 3) == 0;

    float s = 0.0f;
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (int i = threadIdx.x; i < cols / 4; i += THREADS) {
            float4 v = x4[i];
            s += expf(v.x - shift) + expf(v.y - shift) + expf(v.z - shift) + expf(v.w - shift);
        }
    } else {
        for (int i = threadIdx.x; i < cols; i += THREADS) s += expf(xr[i] - shift);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int w = 0; w < THREADS / 32; ++w) t += part[w];
        row_sum = t;
    }
    __syncthreads();
    const float total = row_sum;

    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (int i = threadIdx.x; i < cols / 4; i += THREADS) {
            float4 v = x4[i];
            y4[i] = make_float4(expf(v.x - shift) / total, expf(v.y - shift) / total, expf(v.z - shift) / total,
                                expf(v.w - shift) / total);
        }
    } else {
        for (int i = threadIdx.x; i < cols; i += THREADS) yr[i] = expf(xr[i] - shift) / total;
    }
}

extern "C" void solve(const float* x, float* y, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    softmax_rows<<<rows, THREADS>>>(x, y, cols);
}
