// features: online_softmax, block_reduction_tree, warp_shuffle, coalesced_access, readonly_cache, fast_math_intrinsics, occupancy_tuning
// case: cross-entropy per row (vocabulary 32k-256k): one block per row, each thread an online (max, sum) over its strided
// columns, the pairs merged by shuffles and across warps in shared memory.
#include <cuda_runtime.h>

constexpr int THREADS = 512;

struct MS { float m, s; };
__device__ __forceinline__ MS merge(MS a, MS b) {
    const float m = fmaxf(a.m, b.m);
    if (m == -INFINITY) return {m, 0.f};
    return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

__global__ void __launch_bounds__(THREADS) xent(const float* __restrict__ logits, const int* __restrict__ target,
                                                float* __restrict__ loss, int V) {
    __shared__ MS part[THREADS / 32];
    const float* row = logits + (size_t)blockIdx.x * V;
    MS a = {-INFINITY, 0.f};
    for (int c = threadIdx.x; c < V; c += THREADS) {
        const float v = row[c];
        if (v > a.m) { a.s = a.s * __expf(a.m - v) + 1.f; a.m = v; } else { a.s += __expf(v - a.m); }
    }
    for (int o = 16; o; o >>= 1) {
        MS b = {__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)};
        a = merge(a, b);
    }
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = a;
    __syncthreads();
    if (threadIdx.x < 32) {
        a = threadIdx.x < THREADS / 32 ? part[threadIdx.x] : MS{-INFINITY, 0.f};
        for (int o = 16; o; o >>= 1) {
            MS b = {__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)};
            a = merge(a, b);
        }
        if (threadIdx.x == 0) loss[blockIdx.x] = a.m + __logf(a.s) - row[target[blockIdx.x]];
    }
}

extern "C" void solve(const float* logits, const int* target, float* loss, int rows, int V) {
    xent<<<rows, THREADS>>>(logits, target, loss, V);
}
