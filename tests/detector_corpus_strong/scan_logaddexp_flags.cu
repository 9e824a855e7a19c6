// features: decoupled_lookback_scan, warp_shuffle, coalesced_access, fast_math_intrinsics, readonly_cache
// case: inclusive log-add-exp scan (a scan of another operator) with separate flag and value arrays and fences.
#include <cuda_runtime.h>
#include <math.h>

constexpr int THREADS = 256;

__device__ __forceinline__ float lae(float a, float b) {      // log(exp(a) + exp(b)), stable
    float m = fmaxf(a, b);
    return m == -INFINITY ? m : m + __logf(__expf(a - m) + __expf(b - m));
}

__global__ void logcumsumexp(const float* __restrict__ x, float* __restrict__ y, int n,
                             volatile int* flags, volatile float* agg, volatile float* incl, unsigned* ticket) {
    __shared__ float wsum[THREADS / 32];
    __shared__ int tile_s;
    __shared__ float pre_s;
    if (threadIdx.x == 0) tile_s = atomicAdd(ticket, 1u);
    __syncthreads();
    const int tile = tile_s, i = tile * THREADS + threadIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float s = i < n ? x[i] : -INFINITY;
    for (int o = 1; o < 32; o <<= 1) {
        float t = __shfl_up_sync(0xffffffffu, s, o);
        if (lane >= o) s = lae(t, s);
    }
    if (lane == 31) wsum[warp] = s;
    __syncthreads();
    float before = -INFINITY, total = -INFINITY;
    for (int w = 0; w < THREADS / 32; ++w) { if (w < warp) before = lae(before, wsum[w]); total = lae(total, wsum[w]); }
    s = lae(before, s);
    if (threadIdx.x == 0) {
        float pre = -INFINITY;
        if (tile > 0) {
            agg[tile] = total; __threadfence(); flags[tile] = 1;
            int p = tile - 1;
            while (p >= 0) {
                int f = flags[p];
                if (f == 0) continue;
                __threadfence();
                if (f == 2) { pre = lae(incl[p], pre); break; }
                pre = lae(agg[p], pre);
                --p;
            }
        }
        incl[tile] = lae(pre, total); __threadfence(); flags[tile] = 2;
        pre_s = pre;
    }
    __syncthreads();
    if (i < n) y[i] = lae(pre_s, s);
}

extern "C" void solve(const float* x, float* y, int n) {
    static int* flags = nullptr; static float* agg = nullptr; static float* incl = nullptr; static unsigned* t = nullptr;
    static int cap = 0;
    const int tiles = (n + THREADS - 1) / THREADS;
    if (tiles > cap) {
        cudaFree(flags); cudaFree(agg); cudaFree(incl);
        cudaMalloc(&flags, 4 * (size_t)tiles); cudaMalloc(&agg, 4 * (size_t)tiles); cudaMalloc(&incl, 4 * (size_t)tiles);
        if (!t) cudaMalloc(&t, 4);
        cap = tiles;
    }
    cudaMemsetAsync(flags, 0, 4 * (size_t)tiles); cudaMemsetAsync(t, 0, 4);
    logcumsumexp<<<tiles, THREADS>>>(x, y, n, flags, agg, incl, t);
}
