// features: warp_per_row, warp_shuffle, coalesced_access, loop_unrolling, readonly_cache
// case: top-8 values and indices per row: each lane keeps a sorted list in registers, the warp merges by shuffles.
#include <cuda_runtime.h>

constexpr int K = 8;

__global__ void topk8(const float* __restrict__ x, float* __restrict__ vals, int* __restrict__ idx, int rows, int cols) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (row >= rows) return;
    float v[K]; int ix[K];
    #pragma unroll
    for (int k = 0; k < K; ++k) { v[k] = -INFINITY; ix[k] = -1; }
    const float* xr = x + (size_t)row * cols;
    for (int c = lane; c < cols; c += 32) {
        float a = xr[c];
        if (a > v[K - 1]) {                         // insert, keeping the list sorted
            int p = K - 1;
            #pragma unroll
            for (int k = K - 1; k > 0; --k) if (a > v[k - 1]) { v[k] = v[k - 1]; ix[k] = ix[k - 1]; p = k - 1; }
            v[p] = a; ix[p] = c;
        }
    }
    // K rounds: the warp's maximum head is taken, its owner pops it
    for (int k = 0; k < K; ++k) {
        float best = v[0]; int owner = lane;
        #pragma unroll
        for (int o = 16; o; o >>= 1) {
            float b = __shfl_xor_sync(0xffffffffu, best, o);
            int w = __shfl_xor_sync(0xffffffffu, owner, o);
            if (b > best || (b == best && w < owner)) { best = b; owner = w; }
        }
        int bi = __shfl_sync(0xffffffffu, ix[0], owner);
        if (lane == 0) { vals[(size_t)row * K + k] = best; idx[(size_t)row * K + k] = bi; }
        if (lane == owner) {
            #pragma unroll
            for (int j = 0; j < K - 1; ++j) { v[j] = v[j + 1]; ix[j] = ix[j + 1]; }
            v[K - 1] = -INFINITY; ix[K - 1] = -1;
        }
    }
}

extern "C" void solve(const float* x, float* vals, int* idx, int rows, int cols) {
    topk8<<<(rows + 7) / 8, 256>>>(x, vals, idx, rows, cols);
}
