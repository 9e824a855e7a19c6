// features: privatized_atomics, bank_conflict_padding, grid_stride_loop, vector_loads, coalesced_access, readonly_cache, cache_hints, loop_unrolling, launch_config_tuning, occupancy_tuning
// case: 256-bin histogram of 1 GiB of bytes: a device-sized grid streams 16-byte vectors (4 in flight per thread) and counts into per-lane sub-histograms laid out [bin][lane] in shared memory, so a warp's atomics never share an address or a bank, then each block folds the 32 lane copies (rotated reads) and adds each non-zero bin to global memory once.
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int kBins = 256;
constexpr int kThreads = 256;
constexpr int kUnroll = 4;

__device__ __forceinline__ void count_word(uint32_t* __restrict__ h_lane, uint32_t w) {
    atomicAdd(h_lane + ((w      ) & 0xffu) * 32, 1u);
    atomicAdd(h_lane + ((w >>  8) & 0xffu) * 32, 1u);
    atomicAdd(h_lane + ((w >> 16) & 0xffu) * 32, 1u);
    atomicAdd(h_lane + ((w >> 24)        ) * 32, 1u);
}
__device__ __forceinline__ void count_vec(uint32_t* __restrict__ h_lane, uint4 v) {
    count_word(h_lane, v.x); count_word(h_lane, v.y);
    count_word(h_lane, v.z); count_word(h_lane, v.w);
}

// data + head is 16-byte aligned; bytes [0, head) and the tail past the last full vector are scalar.
__global__ void __launch_bounds__(kThreads, 5)
histogram_u8_kernel(const uint8_t* __restrict__ data, size_t n, size_t head, unsigned int* __restrict__ hist) {
    __shared__ uint32_t h[kBins * 32];                  // [bin][lane]: lane l always hits bank l
    for (int i = threadIdx.x; i < kBins * 32; i += kThreads) h[i] = 0u;
    __syncthreads();

    const int lane = threadIdx.x & 31;
    uint32_t* h_lane = h + lane;
    const size_t tid = (size_t)blockIdx.x * kThreads + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * kThreads;

    const uint4* __restrict__ d4 = reinterpret_cast<const uint4*>(data + head);
    const size_t n16 = (n - head) / 16;
    size_t i = tid;
    for (; i + (kUnroll - 1) * stride < n16; i += kUnroll * stride) {
        uint4 v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(d4 + i + u * stride);   // touched once
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) count_vec(h_lane, v[u]);
    }
    for (; i < n16; i += stride) count_vec(h_lane, __ldcs(d4 + i));

    // Unaligned head and the tail (< 16 bytes each).
    const size_t tail0 = head + n16 * 16;
    if (tid < head) atomicAdd(h_lane + (uint32_t)data[tid] * 32, 1u);
    if (tid < n - tail0) atomicAdd(h_lane + (uint32_t)data[tail0 + tid] * 32, 1u);
    __syncthreads();

    // Fold the 32 lane copies: thread b reads its bin's row starting at column b, so the
    // 32 threads of a warp read 32 different banks at every step.
    for (int b = threadIdx.x; b < kBins; b += kThreads) {
        uint32_t s = 0;
#pragma unroll
        for (int j = 0; j < 32; ++j) s += h[b * 32 + ((j + b) & 31)];
        if (s) atomicAdd(hist + b, s);
    }
}

}  // namespace

// hist[256] (uint32) = histogram of data[0..n). hist is overwritten.
extern "C" cudaError_t histogram_u8(const uint8_t* data, size_t n, unsigned int* hist, cudaStream_t stream) {
    cudaError_t e = cudaMemsetAsync(hist, 0, kBins * sizeof(unsigned int), stream);
    if (e != cudaSuccess || n == 0) return e;
    static int grid_max = 0;
    if (!grid_max) {
        int dev, sms, per_sm = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, histogram_u8_kernel, kThreads, 0);
        grid_max = sms * (per_sm > 0 ? per_sm : 1);     // one full wave, grid-stride inside
    }
    size_t head = (16 - (reinterpret_cast<uintptr_t>(data) & 15)) & 15;
    if (head > n) head = n;
    const size_t n16 = (n - head) / 16;
    size_t want = (n16 + kThreads - 1) / kThreads;
    if (want < 1) want = 1;
    const int grid = (int)(want < (size_t)grid_max ? want : (size_t)grid_max);
    histogram_u8_kernel<<<grid, kThreads, 0, stream>>>(data, n, head, hist);
    return cudaGetLastError();
}
