// features: privatized_atomics, grid_stride_loop, vector_loads, coalesced_access, cache_hints, readonly_cache, loop_unrolling, launch_config_tuning, kernel_fusion, stream_ordered_alloc
// case: weighted 1024-bin histogram of 256M keys: a device-sized grid of float4 grid-stride loops adds weights into 8 private shared histograms per block, merges them with one double atomic per bin per block, and the last block (ticket) writes the fp32 result and clears the scratch.
// Weighted 1024-bin histogram of n (256M) float keys in [0, 1): hist[floor(key * 1024)] += weight.
// Device-sized grid, grid-stride float4 loads of keys and weights, per-warp private histograms in
// shared memory (shared float atomics), one double atomic per bin per block into a global scratch;
// the last block to finish converts the scratch to the fp32 output and clears it for the next call.
#include <cuda_runtime.h>
#include <cstdint>

namespace {

constexpr int BINS = 1024;
constexpr int THREADS = 512;
constexpr int COPIES = 8;                     // private histograms per block (2 warps per copy)
constexpr int UNROLL = 2;

__device__ __forceinline__ int bin_of(float k) {
    int b = __float2int_rz(k * (float)BINS);
    return min(max(b, 0), BINS - 1);
}

__global__ void __launch_bounds__(THREADS)
weighted_hist_kernel(const float* __restrict__ keys, const float* __restrict__ w, size_t n,
                     double* __restrict__ acc, unsigned int* __restrict__ ticket, float* __restrict__ hist) {
    extern __shared__ float sh[];             // COPIES x BINS
    __shared__ bool is_last;
    for (int i = threadIdx.x; i < COPIES * BINS; i += THREADS) sh[i] = 0.f;
    __syncthreads();

    float* my = sh + ((threadIdx.x >> 5) % COPIES) * BINS;
    const float4* k4 = reinterpret_cast<const float4*>(keys);
    const float4* w4 = reinterpret_cast<const float4*>(w);
    const size_t n4 = n / 4;
    const size_t stride = (size_t)gridDim.x * THREADS;
    size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x;
    for (; i + (UNROLL - 1) * stride < n4; i += UNROLL * stride) {
        float4 kv[UNROLL], wv[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) { kv[u] = __ldcs(k4 + i + u * stride); wv[u] = __ldcs(w4 + i + u * stride); }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            atomicAdd(my + bin_of(kv[u].x), wv[u].x);
            atomicAdd(my + bin_of(kv[u].y), wv[u].y);
            atomicAdd(my + bin_of(kv[u].z), wv[u].z);
            atomicAdd(my + bin_of(kv[u].w), wv[u].w);
        }
    }
    for (; i < n4; i += stride) {
        const float4 kv = __ldcs(k4 + i), wv = __ldcs(w4 + i);
        atomicAdd(my + bin_of(kv.x), wv.x);
        atomicAdd(my + bin_of(kv.y), wv.y);
        atomicAdd(my + bin_of(kv.z), wv.z);
        atomicAdd(my + bin_of(kv.w), wv.w);
    }
    if (blockIdx.x == 0 && threadIdx.x < (n & 3)) {
        const size_t j = n4 * 4 + threadIdx.x;
        atomicAdd(my + bin_of(keys[j]), w[j]);
    }
    __syncthreads();

    // merge the private copies: one global atomic per non-empty bin per block
    for (int b = threadIdx.x; b < BINS; b += THREADS) {
        float s = 0.f;
#pragma unroll
        for (int c = 0; c < COPIES; ++c) s += sh[c * BINS + b];
        if (s != 0.f) atomicAdd(acc + b, (double)s);
    }

    // last block: convert to fp32 output and reset the scratch (no memset per call)
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) is_last = (atomicAdd(ticket, 1u) == gridDim.x - 1);
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    for (int b = threadIdx.x; b < BINS; b += THREADS) {
        hist[b] = (float)__ldcg(acc + b);
        acc[b] = 0.0;
    }
    if (threadIdx.x == 0) *ticket = 0;
}

}  // namespace

// keys, w: n floats, 16-byte aligned; hist: 1024 floats (overwritten).
extern "C" cudaError_t weighted_histogram(const float* keys, const float* w, size_t n, float* hist, cudaStream_t stream) {
    static double* acc = nullptr;              // scratch kept across calls (zero between calls)
    static unsigned int* ticket = nullptr;
    static int grid = 0;
    const size_t smem = COPIES * BINS * sizeof(float);   // 32 KB
    if (!acc) {
        cudaError_t e = cudaMallocAsync(&acc, BINS * sizeof(double), stream);
        if (e != cudaSuccess) return e;
        e = cudaMallocAsync(&ticket, sizeof(unsigned int), stream);
        if (e != cudaSuccess) return e;
        cudaMemsetAsync(acc, 0, BINS * sizeof(double), stream);
        cudaMemsetAsync(ticket, 0, sizeof(unsigned int), stream);
        int dev, sms, per_sm;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, weighted_hist_kernel, THREADS, smem);
        grid = sms * (per_sm > 0 ? per_sm : 1);
    }
    const size_t need = (n / 4 + THREADS - 1) / THREADS;
    int g = (int)(need < (size_t)grid ? need : (size_t)grid);
    if (g < 1) g = 1;
    weighted_hist_kernel<<<g, THREADS, smem, stream>>>(keys, w, n, acc, ticket, hist);
    return cudaGetLastError();
}
