// features: persistent_kernel, vector_loads, warp_shuffle, block_reduction_tree, kernel_fusion, coalesced_access, readonly_cache, loop_unrolling, occupancy_tuning, launch_config_tuning, cache_hints
// case: sum of squares in one launch: a device-sized grid walks tiles, block partials, the last block to finish adds them.
#include <cuda_runtime.h>

constexpr int THREADS = 256, TILE = THREADS * 4;

__global__ void __launch_bounds__(THREADS) sumsq(const float4* __restrict__ x, int n4, float* partial, unsigned* done,
                                                 float* out) {
    __shared__ float warp_sum[THREADS / 32];
    __shared__ bool last;
    float acc = 0.f;
    const int tiles = (n4 + THREADS - 1) / THREADS;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int i = t * THREADS + threadIdx.x;
        if (i < n4) { float4 v = x[i]; acc += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w; }
    }
    #pragma unroll
    for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) warp_sum[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < THREADS / 32 ? warp_sum[threadIdx.x] : 0.f;
        #pragma unroll
        for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0) {
            partial[blockIdx.x] = v;
            __threadfence();
            last = atomicAdd(done, 1u) == gridDim.x - 1;
        }
    }
    __syncthreads();
    if (last && threadIdx.x < 32) {                     // the last block: sum the partials, reset the counter
        float v = 0.f;
        for (int b = threadIdx.x; b < gridDim.x; b += 32) v += __ldcg(partial + b);
        #pragma unroll
        for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0) { *out = v; *done = 0; }
    }
}

extern "C" void solve(const float* x, float* out, int n) {   // n % 4 == 0
    static float* partial = nullptr; static unsigned* done = nullptr; static int sms = 0;
    if (!sms) {
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
        cudaMalloc(&partial, sizeof(float) * sms * 8); cudaMalloc(&done, 4); cudaMemset(done, 0, 4);
    }
    const int tiles = (n / 4 + THREADS - 1) / THREADS;
    const int grid = tiles < sms * 8 ? tiles : sms * 8;
    sumsq<<<grid, THREADS>>>(reinterpret_cast<const float4*>(x), n / 4, partial, done, out);
}
