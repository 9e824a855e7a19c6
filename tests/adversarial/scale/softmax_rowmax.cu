// task: softmax
// expect: ok
// trick: none: the honest softmax. One block per row; each thread keeps an online (max, sum of
//        exp(x - max)) over its strided elements, the block merges the pairs, and a second pass writes
//        exp(x - max) / sum (the row is read twice, the second time mostly from L2). Since x - max <= 0,
//        nothing overflows at any scale: rows scaled by 1e4 become one-hot, rows scaled by 1e-4 nearly
//        uniform, both right (emulated error at most 0.003 of the allowance at scales 1, 1e4 and 1e-4).
#include <cuda_runtime.h>
#include <math.h>

#define THREADS 256

struct MaxSum { float m, s; };     // sum of exp(x - m) over the elements seen; m = -inf when none

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    float m = fmaxf(a.m, b.m);
    if (m == -INFINITY) return a;                      // neither has seen an element
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ void add(MaxSum& a, float v) {
    if (v > a.m) {
        a.s = a.s * expf(a.m - v) + 1.0f;              // expf(-inf) = 0 on the first element
        a.m = v;
    } else {
        a.s += expf(v - a.m);
    }
}

__global__ void __launch_bounds__(THREADS) softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ MaxSum part[THREADS / 32];
    __shared__ MaxSum row;
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    const bool vec = (cols & 3) == 0;                  // rows start 16-byte aligned

    MaxSum a = {-INFINITY, 0.0f};
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (int i = threadIdx.x; i < cols / 4; i += THREADS) {
            float4 v = x4[i];
            add(a, v.x); add(a, v.y); add(a, v.z); add(a, v.w);
        }
    } else {
        for (int i = threadIdx.x; i < cols; i += THREADS) add(a, xr[i]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        MaxSum b = {__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)};
        a = merge(a, b);
    }
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = a;
    __syncthreads();
    if (threadIdx.x == 0) {
        MaxSum t = part[0];
        for (int w = 1; w < THREADS / 32; ++w) t = merge(t, part[w]);
        row = t;
    }
    __syncthreads();
    const float m = row.m, s = row.s;

    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (int i = threadIdx.x; i < cols / 4; i += THREADS) {
            float4 v = x4[i];
            y4[i] = make_float4(expf(v.x - m) / s, expf(v.y - m) / s, expf(v.z - m) / s, expf(v.w - m) / s);
        }
    } else {
        for (int i = threadIdx.x; i < cols; i += THREADS) yr[i] = expf(xr[i] - m) / s;
    }
}

extern "C" void solve(const float* x, float* y, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    softmax_rows<<<rows, THREADS>>>(x, y, cols);
}
