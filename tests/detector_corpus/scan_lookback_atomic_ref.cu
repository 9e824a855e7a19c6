// features: decoupled_lookback_scan, block_reduction_tree, coalesced_access
// case: single-pass sum-of-tiles with cuda::atomic_ref status words: reduce the tile, publish, look back.
#include <cuda/atomic>
__global__ void tile_prefix(const float* x, float* tile_prefix_out, unsigned long long* state, int n) {
    __shared__ float red[256];
    int tile = blockIdx.x;
    int i = tile * 256 + threadIdx.x;
    red[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        float agg = red[0], excl = 0.f;
        cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> mine(state[tile]);
        mine.store((1ull << 32) | __float_as_uint(agg), cuda::memory_order_release);
        for (int p = tile - 1; p >= 0; ) {
            cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> other(state[p]);
            unsigned long long v = other.load(cuda::memory_order_acquire);
            unsigned flag = (unsigned)(v >> 32);
            if (!flag) continue;
            excl += __uint_as_float((unsigned)v);
            if (flag == 2) break;
            --p;
        }
        mine.store((2ull << 32) | __float_as_uint(excl + agg), cuda::memory_order_release);
        tile_prefix_out[tile] = excl;
    }
}
