// features: decoupled_lookback_scan, warp_vote_match, warp_shuffle, vector_loads, cache_hints, smem_tiling, coalesced_access, loop_unrolling, readonly_cache, stream_ordered_alloc
// case: order-preserving compaction of x > t over 100M floats in one pass: each block takes a 4096-element tile by ticket, ranks its survivors with ballots and one 32-slot warp scan, publishes its count in an epoch-tagged 64-bit status word, resolves its global offset by a warp-parallel decoupled look-back, and stages the survivors in shared memory so the output is written contiguously.
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int THREADS = 256;
constexpr int WARPS   = THREADS / 32;
constexpr int VPT     = 4;                                  // float4 per thread
constexpr int TILE    = THREADS * VPT * 4;                  // 4096 elements per tile
constexpr unsigned FULL = 0xffffffffu;
constexpr uint32_t FLAG_AGG = 1, FLAG_INC = 2;

// status word: high 32 bits = epoch * 4 + flag, low 32 bits = count. A word from an earlier call
// carries another epoch and reads as "not published", so no per-call reset is needed.
__device__ __forceinline__ void publish(unsigned long long* p, uint32_t epoch, uint32_t flag, uint32_t v)
{
    const unsigned long long w = ((unsigned long long)(epoch * 4u + flag) << 32) | v;
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;\n" :: "l"(p), "l"(w) : "memory");
}
__device__ __forceinline__ unsigned long long load_status(const unsigned long long* p)
{
    unsigned long long w;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];\n" : "=l"(w) : "l"(p) : "memory");
    return w;
}

// Warp-parallel look-back: lane i inspects tile (base - i); returns the exclusive prefix of `tile`.
__device__ __forceinline__ uint32_t lookback(const unsigned long long* status, int tile, uint32_t epoch, int lane)
{
    uint32_t excl = 0;
    int base = tile - 1;
    while (true) {
        const int p = base - lane;
        uint32_t flag, val;
        while (true) {
            if (p >= 0) {
                const unsigned long long w = load_status(status + p);
                const uint32_t hi = (uint32_t)(w >> 32);
                flag = ((hi >> 2) == epoch) ? (hi & 3u) : 0u;
                val  = (uint32_t)w;
            } else {
                flag = FLAG_INC; val = 0;                    // before tile 0: nothing
            }
            if (!__any_sync(FULL, flag == 0)) break;         // wait until the whole window is published
        }
        const uint32_t inc_mask = __ballot_sync(FULL, flag == FLAG_INC);
        const int stop = inc_mask ? (__ffs(inc_mask) - 1) : 31;   // nearest tile with an inclusive prefix
        uint32_t v = (lane <= stop) ? val : 0u;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
        excl += v;
        if (inc_mask) return excl;
        base -= 32;
    }
}

template <bool VEC>
__global__ void __launch_bounds__(THREADS)
compact_gt_kernel(const float* __restrict__ x, float* __restrict__ out, size_t n, float t,
                  unsigned long long* __restrict__ status, unsigned long long* __restrict__ ticket,
                  unsigned long long ticket_base, uint32_t epoch, int num_tiles,
                  unsigned int* __restrict__ count_out)
{
    __shared__ __align__(16) float s_out[TILE];
    __shared__ uint32_t s_scan[VPT * WARPS];
    __shared__ uint32_t s_excl, s_total;
    __shared__ int s_tile;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    // ticket order = start order, so every predecessor tile belongs to a block already running
    if (tid == 0) s_tile = (int)(atomicAdd(ticket, 1ull) - ticket_base);
    __syncthreads();
    const int tile = s_tile;
    const size_t tile_base = (size_t)tile * TILE;

    float4 v[VPT];
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
        const size_t e = tile_base + ((size_t)(j * THREADS + tid) << 2);
        if (VEC && e + 3 < n) {
            v[j] = __ldcs(reinterpret_cast<const float4*>(x + e));     // read once: evict-first
        } else {
            v[j].x = e + 0 < n ? __ldcs(x + e + 0) : -INFINITY;
            v[j].y = e + 1 < n ? __ldcs(x + e + 1) : -INFINITY;
            v[j].z = e + 2 < n ? __ldcs(x + e + 2) : -INFINITY;
            v[j].w = e + 3 < n ? __ldcs(x + e + 3) : -INFINITY;
        }
    }

    // rank inside the warp: element (j, lane, c) sits after all kept elements of lanes < lane in slice j
    const uint32_t lt = (1u << lane) - 1u;
    uint32_t fl[VPT], pre[VPT];
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
        const bool f0 = v[j].x > t, f1 = v[j].y > t, f2 = v[j].z > t, f3 = v[j].w > t;
        const uint32_t b0 = __ballot_sync(FULL, f0), b1 = __ballot_sync(FULL, f1);
        const uint32_t b2 = __ballot_sync(FULL, f2), b3 = __ballot_sync(FULL, f3);
        fl[j]  = (uint32_t)f0 | ((uint32_t)f1 << 1) | ((uint32_t)f2 << 2) | ((uint32_t)f3 << 3);
        pre[j] = __popc(b0 & lt) + __popc(b1 & lt) + __popc(b2 & lt) + __popc(b3 & lt);
        if (lane == 0) s_scan[j * WARPS + warp] = __popc(b0) + __popc(b1) + __popc(b2) + __popc(b3);
    }
    __syncthreads();

    // one warp scans the 32 (slice, warp) counts, publishes the tile aggregate and looks back
    if (warp == 0) {
        const uint32_t c = s_scan[lane];
        uint32_t inc = c;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const uint32_t y = __shfl_up_sync(FULL, inc, o);
            if (lane >= o) inc += y;
        }
        const uint32_t total = __shfl_sync(FULL, inc, 31);
        if (lane == 0) publish(status + tile, epoch, tile == 0 ? FLAG_INC : FLAG_AGG, total);
        uint32_t excl = 0;
        if (tile > 0) {
            excl = lookback(status, tile, epoch, lane);
            if (lane == 0) publish(status + tile, epoch, FLAG_INC, excl + total);
        }
        s_scan[lane] = inc - c;
        if (lane == 0) {
            s_excl = excl; s_total = total;
            if (tile == num_tiles - 1) *count_out = excl + total;
        }
    }
    __syncthreads();

    // scatter survivors to their tile-local slots, then write them out contiguously
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
        uint32_t pos = s_scan[j * WARPS + warp] + pre[j];
        if (fl[j] & 1u) s_out[pos++] = v[j].x;
        if (fl[j] & 2u) s_out[pos++] = v[j].y;
        if (fl[j] & 4u) s_out[pos++] = v[j].z;
        if (fl[j] & 8u) s_out[pos++] = v[j].w;
    }
    __syncthreads();
    const uint32_t total = s_total;
    float* o = out + s_excl;
    for (uint32_t i = tid; i < total; i += THREADS) __stcs(o + i, s_out[i]);
}

// persistent scratch: status words (epoch-tagged, zeroed once) and a ticket counter that keeps counting
struct CompactState {
    unsigned long long* status = nullptr;
    unsigned long long* ticket = nullptr;
    size_t capacity = 0;
    unsigned long long ticket_base = 0;
    uint32_t epoch = 0;
};
CompactState g_state;

} // namespace

// out[0 .. *d_count) = the elements of x with x[i] > t, in their original order. Returns the count on the device.
extern "C" cudaError_t stream_compact_gt(const float* d_x, size_t n, float t, float* d_out,
                                         unsigned int* d_count, cudaStream_t stream)
{
    if (n == 0) return cudaMemsetAsync(d_count, 0, sizeof(unsigned int), stream);
    const size_t tiles = (n + TILE - 1) / TILE;
    if (tiles > 0x7fffffff || n > 0xffffffffull) return cudaErrorInvalidValue;
    CompactState& st = g_state;
    cudaError_t err;
    if (st.capacity < tiles || st.epoch >= (1u << 30) - 1) {
        if (st.status) cudaFreeAsync(st.status, stream);
        if (!st.ticket) {
            err = cudaMallocAsync(&st.ticket, sizeof(unsigned long long), stream);
            if (err != cudaSuccess) return err;
            cudaMemsetAsync(st.ticket, 0, sizeof(unsigned long long), stream);
            st.ticket_base = 0;
        }
        const size_t cap = tiles + tiles / 4 + 64;
        err = cudaMallocAsync(&st.status, cap * sizeof(unsigned long long), stream);
        if (err != cudaSuccess) { st.status = nullptr; st.capacity = 0; return err; }
        cudaMemsetAsync(st.status, 0, cap * sizeof(unsigned long long), stream);   // epoch 0 never matches
        st.capacity = cap;
        st.epoch = 0;
    }
    ++st.epoch;
    const bool vec = (reinterpret_cast<uintptr_t>(d_x) & 15) == 0;
    if (vec) compact_gt_kernel<true ><<<(unsigned)tiles, THREADS, 0, stream>>>(d_x, d_out, n, t, st.status, st.ticket, st.ticket_base, st.epoch, (int)tiles, d_count);
    else     compact_gt_kernel<false><<<(unsigned)tiles, THREADS, 0, stream>>>(d_x, d_out, n, t, st.status, st.ticket, st.ticket_base, st.epoch, (int)tiles, d_count);
    st.ticket_base += tiles;
    return cudaGetLastError();
}
