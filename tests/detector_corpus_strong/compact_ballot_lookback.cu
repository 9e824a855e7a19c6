// features: decoupled_lookback_scan, warp_vote_match, coalesced_access, readonly_cache
// case: stream compaction (keep x > threshold) in one pass: ballot/popc ranks in a warp, a look-back across tiles.
#include <cuda_runtime.h>

constexpr int THREADS = 512;
constexpr unsigned FLAG_AGG = 1u << 30, FLAG_INC = 2u << 30, VALUE = (1u << 30) - 1;

__global__ void compact(const float* __restrict__ x, float* __restrict__ y, int* count, int n, float thr,
                        volatile unsigned* status, unsigned* ticket) {
    __shared__ int warp_cnt[THREADS / 32], tile_s, base_s;
    if (threadIdx.x == 0) tile_s = atomicAdd(ticket, 1u);
    __syncthreads();
    const int tile = tile_s, i = tile * THREADS + threadIdx.x;
    const float v = i < n ? x[i] : 0.f;
    const bool keep = i < n && v > thr;
    const unsigned mask = __ballot_sync(0xffffffffu, keep);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int rank = __popc(mask & ((1u << lane) - 1));
    if (lane == 0) warp_cnt[warp] = __popc(mask);
    __syncthreads();
    if (threadIdx.x == 0) {
        int agg = 0;
        for (int w = 0; w < THREADS / 32; ++w) { int c = warp_cnt[w]; warp_cnt[w] = agg; agg += c; }
        int excl = 0;
        if (tile > 0) {
            status[tile] = FLAG_AGG | agg;
            __threadfence();
            for (int p = tile - 1; p >= 0;) {
                unsigned s = status[p];
                if (!(s & (FLAG_AGG | FLAG_INC))) continue;
                excl += s & VALUE;
                if (s & FLAG_INC) break;
                --p;
            }
        }
        __threadfence();
        status[tile] = FLAG_INC | (excl + agg);
        base_s = excl;
        if (tile == gridDim.x - 1) *count = excl + agg;
    }
    __syncthreads();
    if (keep) y[base_s + warp_cnt[warp] + rank] = v;
}

extern "C" void solve(const float* x, float* y, int* count, int n, float thr) {
    static unsigned* status = nullptr; static unsigned* ticket = nullptr; static int cap = 0;
    const int tiles = (n + THREADS - 1) / THREADS;
    if (tiles > cap) { cudaFree(status); cudaMalloc(&status, 4 * (size_t)tiles); cap = tiles; if (!ticket) cudaMalloc(&ticket, 4); }
    cudaMemsetAsync(status, 0, 4 * (size_t)tiles);
    cudaMemsetAsync(ticket, 0, 4);
    compact<<<tiles, THREADS>>>(x, y, count, n, thr, status, ticket);
}
