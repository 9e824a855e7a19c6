// features: decoupled_lookback_scan, block_reduction_tree, warp_shuffle, warp_vote_match, vector_loads, coalesced_access, readonly_cache, cache_hints, loop_unrolling, stream_ordered_alloc, occupancy_tuning
// case: Single-pass inclusive running-max scan of 100M floats: blocks take 4096-element tiles from an atomic ticket, scan them with float4 per lane and shuffle scans per warp, and chain tiles with a decoupled look-back over epoch-tagged 64-bit status words (flag and value in one word), so no memset per call.
#include <cuda_runtime.h>
#include <stdint.h>
#include <math.h>

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kChunks = 4;                         // float4 per lane
constexpr int kWarpElems = kChunks * 32 * 4;       // 512 contiguous floats per warp
constexpr int kTileElems = kWarps * kWarpElems;    // 4096 floats per tile

constexpr unsigned kFlagAggregate = 1u;
constexpr unsigned kFlagPrefix = 2u;

__device__ __forceinline__ unsigned long long ld_relaxed(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_relaxed(unsigned long long* p, unsigned long long v) {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long pack(unsigned epoch, unsigned flag, float v) {
    return ((unsigned long long)((epoch << 2) | flag) << 32) | (unsigned long long)__float_as_uint(v);
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__global__ void __launch_bounds__(kThreads, 4)
scan_max_kernel(const float* __restrict__ in, float* __restrict__ out, size_t n,
                unsigned long long* __restrict__ status, unsigned long long* __restrict__ ticket,
                unsigned long long ticket_base, unsigned epoch, bool vec_ok) {
    __shared__ unsigned s_tile;
    __shared__ float s_warp[kWarps];
    __shared__ float s_prefix;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) s_tile = (unsigned)(atomicAdd(ticket, 1ull) - ticket_base);
    __syncthreads();
    const unsigned tile = s_tile;                   // tickets in start order: predecessors run or are done
    const size_t tile_base = (size_t)tile * kTileElems;
    const size_t warp_base = tile_base + (size_t)warp * kWarpElems;
    const bool full = vec_ok && (tile_base + kTileElems <= n);

    float4 v[kChunks];
    if (full) {
        const float4* __restrict__ in4 = reinterpret_cast<const float4*>(in + warp_base);
#pragma unroll
        for (int j = 0; j < kChunks; ++j) v[j] = __ldcs(in4 + j * 32 + lane);   // 512 B per warp load
    } else {
#pragma unroll
        for (int j = 0; j < kChunks; ++j) {
            const size_t e = warp_base + (size_t)j * 128 + lane * 4;
            v[j].x = (e + 0 < n) ? __ldcs(in + e + 0) : -INFINITY;
            v[j].y = (e + 1 < n) ? __ldcs(in + e + 1) : -INFINITY;
            v[j].z = (e + 2 < n) ? __ldcs(in + e + 2) : -INFINITY;
            v[j].w = (e + 3 < n) ? __ldcs(in + e + 3) : -INFINITY;
        }
    }

    // Warp-level scan of the warp's 512 contiguous values, chunk by chunk.
    float carry = -INFINITY;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
        v[j].y = fmaxf(v[j].x, v[j].y);
        v[j].z = fmaxf(v[j].y, v[j].z);
        v[j].w = fmaxf(v[j].z, v[j].w);
        float t = v[j].w;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const float u = __shfl_up_sync(0xffffffffu, t, o);
            if (lane >= o) t = fmaxf(t, u);
        }
        float ex = __shfl_up_sync(0xffffffffu, t, 1);
        ex = (lane == 0) ? carry : fmaxf(ex, carry);
        v[j].x = fmaxf(v[j].x, ex); v[j].y = fmaxf(v[j].y, ex);
        v[j].z = fmaxf(v[j].z, ex); v[j].w = fmaxf(v[j].w, ex);
        carry = fmaxf(carry, __shfl_sync(0xffffffffu, t, 31));
    }
    if (lane == 0) s_warp[warp] = carry;
    __syncthreads();

    // Decoupled look-back, done by warp 0.
    if (warp == 0) {
        float agg = (lane < kWarps) ? s_warp[lane] : -INFINITY;
        agg = warp_max(agg);
        if (tile == 0) {
            if (lane == 0) {
                st_relaxed(status, pack(epoch, kFlagPrefix, agg));
                s_prefix = -INFINITY;
            }
        } else {
            if (lane == 0) st_relaxed(status + tile, pack(epoch, kFlagAggregate, agg));
            float excl = -INFINITY;
            long long window = (long long)tile - 1;          // predecessor read by lane 0
            while (true) {
                const long long idx = window - lane;
                unsigned flag = kFlagPrefix;                  // before tile 0: identity prefix
                float val = -INFINITY;
                bool waiting = idx >= 0;
                do {
                    if (waiting) {
                        const unsigned long long w = ld_relaxed(status + idx);
                        const unsigned hi = (unsigned)(w >> 32);
                        if ((hi >> 2) == epoch && (hi & 3u) != 0u) {   // stale epochs read as not published
                            flag = hi & 3u;
                            val = __uint_as_float((unsigned)w);
                            waiting = false;
                        }
                    }
                } while (__any_sync(0xffffffffu, waiting));
                const unsigned pmask = __ballot_sync(0xffffffffu, flag == kFlagPrefix);
                if (pmask) {
                    const int first = __ffs(pmask) - 1;       // nearest predecessor with an inclusive prefix
                    excl = fmaxf(excl, warp_max(lane <= first ? val : -INFINITY));
                    break;
                }
                excl = fmaxf(excl, warp_max(val));            // 32 aggregates, keep walking back
                window -= 32;
            }
            if (lane == 0) {
                st_relaxed(status + tile, pack(epoch, kFlagPrefix, fmaxf(excl, agg)));
                s_prefix = excl;
            }
        }
    }
    __syncthreads();

    float pre = s_prefix;
    for (int w = 0; w < warp; ++w) pre = fmaxf(pre, s_warp[w]);

    if (full) {
        float4* __restrict__ out4 = reinterpret_cast<float4*>(out + warp_base);
#pragma unroll
        for (int j = 0; j < kChunks; ++j) {
            float4 r = v[j];
            r.x = fmaxf(r.x, pre); r.y = fmaxf(r.y, pre); r.z = fmaxf(r.z, pre); r.w = fmaxf(r.w, pre);
            __stcs(out4 + j * 32 + lane, r);
        }
    } else {
#pragma unroll
        for (int j = 0; j < kChunks; ++j) {
            const size_t e = warp_base + (size_t)j * 128 + lane * 4;
            if (e + 0 < n) out[e + 0] = fmaxf(v[j].x, pre);
            if (e + 1 < n) out[e + 1] = fmaxf(v[j].y, pre);
            if (e + 2 < n) out[e + 2] = fmaxf(v[j].z, pre);
            if (e + 3 < n) out[e + 3] = fmaxf(v[j].w, pre);
        }
    }
}

// Scratch kept across calls: [0] = ticket counter, [1 ..] = per-tile status words.
unsigned long long* g_scratch = nullptr;
size_t g_capacity_tiles = 0;
unsigned g_epoch = 0;
unsigned long long g_ticket = 0;

}  // namespace

// Not safe for concurrent calls from several host threads or streams (shared scratch).
extern "C" cudaError_t scan_max_lookback(const float* in, float* out, size_t n, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    const size_t tiles = (n + kTileElems - 1) / kTileElems;
    if (tiles > 0xffffffffull) return cudaErrorInvalidValue;
    if (tiles > g_capacity_tiles || g_epoch + 1 >= (1u << 30)) {
        if (tiles > g_capacity_tiles) {
            if (g_scratch) cudaFree(g_scratch);
            const size_t cap = tiles + tiles / 4 + 64;
            cudaError_t e = cudaMalloc(&g_scratch, (cap + 1) * sizeof(unsigned long long));
            if (e != cudaSuccess) { g_scratch = nullptr; g_capacity_tiles = 0; return e; }
            g_capacity_tiles = cap;
        }
        cudaMemsetAsync(g_scratch, 0, (g_capacity_tiles + 1) * sizeof(unsigned long long), stream);
        g_epoch = 0;
        g_ticket = 0;
    }
    ++g_epoch;
    const bool vec_ok = ((reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(out)) & 15) == 0;
    scan_max_kernel<<<(unsigned)tiles, kThreads, 0, stream>>>(in, out, n, g_scratch + 1, g_scratch,
                                                               g_ticket, g_epoch, vec_ok);
    g_ticket += tiles;
    return cudaGetLastError();
}
