// features: block_reduction_tree, warp_shuffle, vector_loads, coalesced_access, readonly_cache, cache_hints, loop_unrolling, occupancy_tuning
// case: Row-wise max and argmax (first index on ties, NaN wins like torch.argmax) of an 8192 x 32768 fp32 matrix: one 512-thread block per row streams it with 4 float4 loads in flight per thread, each thread keeps a (value, index) pair, pairs are reduced by xor-shuffles and a 32-slot shared array.
#include <cuda_runtime.h>
#include <stdint.h>
#include <math.h>

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 4;

// true when candidate (v, i) should replace (m, mi): larger value, NaN beats non-NaN,
// equal values (or both NaN) keep the smaller index.
__device__ __forceinline__ bool better(float v, int i, float m, int mi) {
    const bool vn = (v != v), mn = (m != m);
    if (vn || mn) return vn && (!mn || i < mi);
    return (v > m) || (v == m && i < mi);
}

__device__ __forceinline__ void take(float& m, int& mi, float v, int i) {
    if (better(v, i, m, mi)) { m = v; mi = i; }
}

__global__ void __launch_bounds__(kThreads, 4)
argmax_rows_kernel(const float* __restrict__ x, float* __restrict__ out_max,
                   int* __restrict__ out_idx, int cols) {
    const int row = blockIdx.x;
    const float* __restrict__ xr = x + (size_t)row * cols;
    float m = -INFINITY;
    int mi = 0x7fffffff;

    int done = 0;
    if ((reinterpret_cast<uintptr_t>(xr) & 15) == 0) {
        const int c4 = cols >> 2;
        const float4* __restrict__ x4 = reinterpret_cast<const float4*>(xr);
        int base = 0;
        // Each step: kUnroll float4 per thread, consecutive threads on consecutive float4.
        for (; base + kUnroll * kThreads <= c4; base += kUnroll * kThreads) {
            float4 v[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(x4 + base + u * kThreads + threadIdx.x);
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int c = (base + u * kThreads + threadIdx.x) << 2;
                // Within a thread indices increase, so strict '>' keeps the first on ties.
                if (v[u].x > m || (v[u].x != v[u].x && m == m)) { m = v[u].x; mi = c; }
                if (v[u].y > m || (v[u].y != v[u].y && m == m)) { m = v[u].y; mi = c + 1; }
                if (v[u].z > m || (v[u].z != v[u].z && m == m)) { m = v[u].z; mi = c + 2; }
                if (v[u].w > m || (v[u].w != v[u].w && m == m)) { m = v[u].w; mi = c + 3; }
            }
        }
        for (int q = base + threadIdx.x; q < c4; q += kThreads) {
            const float4 v = __ldcs(x4 + q);
            const int c = q << 2;
            take(m, mi, v.x, c); take(m, mi, v.y, c + 1);
            take(m, mi, v.z, c + 2); take(m, mi, v.w, c + 3);
        }
        done = c4 << 2;
    }
    for (int c = done + threadIdx.x; c < cols; c += kThreads) take(m, mi, __ldcs(xr + c), c);

    // Warp reduction of (value, index) pairs.
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float om = __shfl_xor_sync(0xffffffffu, m, o);
        const int oi = __shfl_xor_sync(0xffffffffu, mi, o);
        take(m, mi, om, oi);
    }
    __shared__ float s_m[32];
    __shared__ int s_i[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { s_m[warp] = m; s_i[warp] = mi; }
    __syncthreads();
    if (warp == 0) {
        m = (lane < kWarps) ? s_m[lane] : -INFINITY;
        mi = (lane < kWarps) ? s_i[lane] : 0x7fffffff;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float om = __shfl_xor_sync(0xffffffffu, m, o);
            const int oi = __shfl_xor_sync(0xffffffffu, mi, o);
            take(m, mi, om, oi);
        }
        if (lane == 0) {
            out_max[row] = m;
            out_idx[row] = (mi == 0x7fffffff) ? 0 : mi;   // all -inf row: index 0
        }
    }
}

}  // namespace

extern "C" cudaError_t argmax_rows(const float* x, float* out_max, int* out_idx, int rows, int cols,
                                   cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    argmax_rows_kernel<<<rows, kThreads, 0, stream>>>(x, out_max, out_idx, cols);
    return cudaGetLastError();
}
