// features: decoupled_lookback_scan, warp_shuffle, coalesced_access, loop_unrolling, readonly_cache, occupancy_tuning
// case: inclusive max-scan in one pass; status words carry the call's epoch, so no memset per call.
#include <cuda_runtime.h>
#include <cstdint>

constexpr int THREADS = 256, ITEMS = 4, TILE = THREADS * ITEMS;
// status word: [63:40] epoch, [39:32] flag (1 aggregate, 2 inclusive), [31:0] value bits
__device__ __forceinline__ unsigned long long pack(uint32_t epoch, uint32_t flag, float v) {
    return ((unsigned long long)epoch << 40) | ((unsigned long long)flag << 32) | __float_as_uint(v);
}

__global__ void __launch_bounds__(THREADS) max_scan(const float* __restrict__ x, float* __restrict__ y, int n,
                                                    unsigned long long* status, unsigned int* ticket,
                                                    uint32_t epoch, unsigned int ticket_base) {
    __shared__ unsigned int tile_s;
    __shared__ float warp_max[THREADS / 32];
    __shared__ float prefix_s;
    if (threadIdx.x == 0) tile_s = atomicAdd(ticket, 1u) - ticket_base;   // tiles in start order
    __syncthreads();
    const int tile = tile_s, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int base = tile * TILE;
    float v[ITEMS];
    #pragma unroll
    for (int i = 0; i < ITEMS; ++i) {             // item i of every thread: consecutive threads, consecutive floats
        int idx = base + i * THREADS + threadIdx.x;
        v[i] = idx < n ? x[idx] : -INFINITY;
    }
    // scan each column of items across the block: per item, a warp scan then the warps' totals
    float carry = -INFINITY;
    for (int i = 0; i < ITEMS; ++i) {
        float s = v[i];
        #pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            float t = __shfl_up_sync(0xffffffffu, s, off);
            if (lane >= off) s = fmaxf(s, t);
        }
        if (lane == 31) warp_max[warp] = s;
        __syncthreads();
        float before = carry;
        for (int w = 0; w < warp; ++w) before = fmaxf(before, warp_max[w]);
        float total = carry;
        for (int w = 0; w < THREADS / 32; ++w) total = fmaxf(total, warp_max[w]);
        v[i] = fmaxf(s, before);
        carry = total;
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        float excl = -INFINITY;
        if (tile == 0) {
            atomicExch(&status[0], pack(epoch, 2, carry));
        } else {
            atomicExch(&status[tile], pack(epoch, 1, carry));
            for (int p = tile - 1; p >= 0;) {
                unsigned long long s = atomicAdd(&status[p], 0ull);
                uint32_t e = (uint32_t)(s >> 40), flag = (uint32_t)(s >> 32) & 0xff;
                if (e != epoch || flag == 0) continue;          // a word of an earlier call: not published yet
                excl = fmaxf(excl, __uint_as_float((uint32_t)s));
                if (flag == 2) break;
                --p;
            }
            atomicExch(&status[tile], pack(epoch, 2, fmaxf(excl, carry)));
        }
        prefix_s = excl;
    }
    __syncthreads();
    const float pre = prefix_s;
    #pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        int idx = base + i * THREADS + threadIdx.x;
        if (idx < n) y[idx] = fmaxf(v[i], pre);
    }
}

extern "C" void solve(const float* x, float* y, int n) {
    static unsigned long long* status = nullptr;
    static unsigned int* ticket = nullptr;
    static int cap = 0;
    static uint32_t epoch = 0;
    static unsigned int issued = 0;
    const int tiles = (n + TILE - 1) / TILE;
    if (tiles > cap) {
        cudaFree(status);
        cudaMalloc(&status, sizeof(unsigned long long) * tiles);
        cudaMemset(status, 0, sizeof(unsigned long long) * tiles);
        if (!ticket) { cudaMalloc(&ticket, sizeof(unsigned int)); cudaMemset(ticket, 0, sizeof(unsigned int)); }
        cap = tiles;
    }
    ++epoch;                                  // new tag: the words of the last call read as "not published"
    max_scan<<<tiles, THREADS>>>(x, y, n, status, ticket, epoch & 0xffffff, issued);
    issued += tiles;
}
