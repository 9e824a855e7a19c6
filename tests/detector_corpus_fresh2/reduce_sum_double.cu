// features: grid_stride_loop, vector_loads, coalesced_access, loop_unrolling, warp_shuffle, block_reduction_tree, kernel_fusion, cache_hints, readonly_cache, launch_config_tuning, stream_ordered_alloc
// case: sum of 256M floats in double with a device-sized grid of float4 grid-stride loops into 4 double accumulators, a shuffle plus shared-array block reduction, and the last block (threadfence and atomic ticket) summing the per-block partials in fixed order in the same launch.
// Sum of n floats (256M) accumulated in double; one result. Single launch: per-block partials,
// the last block to finish sums them in a fixed order (deterministic).
#include <cuda_runtime.h>
#include <cstdint>

namespace {

constexpr int THREADS = 512;
constexpr int UNROLL = 4;
constexpr int MAX_BLOCKS = 4096;

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ double block_sum(double v, double* red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < THREADS / 32 ? red[lane] : 0.0;
        v = warp_sum(v);
    }
    return v;  // valid in thread 0
}

__global__ void __launch_bounds__(THREADS)
reduce_sum_double_kernel(const float* __restrict__ x, size_t n, double* __restrict__ partials,
                         unsigned int* __restrict__ ticket, double* __restrict__ out) {
    __shared__ double red[THREADS / 32];
    __shared__ bool is_last;

    const float4* x4 = reinterpret_cast<const float4*>(x);
    const size_t n4 = n / 4;
    const size_t stride = (size_t)gridDim.x * THREADS;
    size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x;

    // every float is converted and added in double; UNROLL independent accumulators
    double acc[UNROLL] = {0.0, 0.0, 0.0, 0.0};
    for (; i + (UNROLL - 1) * stride < n4; i += UNROLL * stride) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = __ldcs(x4 + i + u * stride);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            acc[u] += ((double)v[u].x + (double)v[u].y) + ((double)v[u].z + (double)v[u].w);
    }
    for (; i < n4; i += stride) {
        const float4 v = __ldcs(x4 + i);
        acc[0] += ((double)v.x + (double)v.y) + ((double)v.z + (double)v.w);
    }
    // scalar tail (n % 4), handled by block 0
    if (blockIdx.x == 0 && threadIdx.x < (n & 3)) acc[1] += (double)x[n4 * 4 + threadIdx.x];

    double s = block_sum((acc[0] + acc[1]) + (acc[2] + acc[3]), red);
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = s;
        __threadfence();
        const unsigned int t = atomicAdd(ticket, 1u);
        is_last = (t == gridDim.x - 1);
    }
    __syncthreads();
    if (!is_last) return;

    // last block: fixed-order sum of all partials
    __threadfence();
    double v = 0.0;
    for (int b = threadIdx.x; b < (int)gridDim.x; b += THREADS) v += __ldcg(partials + b);
    __syncthreads();  // red[] reuse
    v = block_sum(v, red);
    if (threadIdx.x == 0) {
        *out = v;
        *ticket = 0;  // ready for the next call without a memset
    }
}

}  // namespace

extern "C" cudaError_t reduce_sum_double(const float* x, size_t n, double* out, cudaStream_t stream) {
    static double* partials = nullptr;   // scratch kept across calls
    static unsigned int* ticket = nullptr;
    static int grid = 0;
    if (!partials) {
        cudaError_t e = cudaMallocAsync(&partials, MAX_BLOCKS * sizeof(double), stream);
        if (e != cudaSuccess) return e;
        e = cudaMallocAsync(&ticket, sizeof(unsigned int), stream);
        if (e != cudaSuccess) return e;
        cudaMemsetAsync(ticket, 0, sizeof(unsigned int), stream);
        int dev, sms, per_sm;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reduce_sum_double_kernel, THREADS, 0);
        grid = sms * per_sm;
        if (grid > MAX_BLOCKS) grid = MAX_BLOCKS;
    }
    if (reinterpret_cast<uintptr_t>(x) % 16 != 0) return cudaErrorMisalignedAddress;
    const size_t need = (n / 4 + THREADS - 1) / THREADS;
    int g = (int)(need < (size_t)grid ? need : (size_t)grid);
    if (g < 1) g = 1;
    reduce_sum_double_kernel<<<g, THREADS, 0, stream>>>(x, n, partials, ticket, out);
    return cudaGetLastError();
}
