// features: radix_sort, decoupled_lookback_scan, privatized_atomics, warp_vote_match, warp_shuffle, smem_tiling, coalesced_access, vector_loads, grid_stride_loop, loop_unrolling, readonly_cache, launch_config_tuning, occupancy_tuning, stream_ordered_alloc
// case: LSD radix sort of 64M uint32 keys, onesweep style: one upfront read builds the four 8-bit digit histograms in privatized shared memory, then one kernel per pass takes 8192-key tiles by ticket, ranks keys stably with __match_any_sync per warp, chains per-digit tile offsets by decoupled look-back, and scatters through a digit-sorted shared-memory copy of the tile.
#include <cuda_runtime.h>
#include <stdint.h>
#include <algorithm>

namespace {

constexpr int RADIX_BITS = 8;
constexpr int RADIX      = 1 << RADIX_BITS;          // 256
constexpr int PASSES     = 32 / RADIX_BITS;          // 4
constexpr int THREADS    = 512;
constexpr int WARPS      = THREADS / 32;             // 16
constexpr int KPT        = 16;                       // keys per thread
constexpr int TILE       = THREADS * KPT;            // 8192 keys per tile
constexpr int HIST_THREADS = 512;
constexpr unsigned FULL  = 0xffffffffu;
constexpr uint32_t FLAG_AGG = 1u << 30, FLAG_INC = 2u << 30, VALUE_MASK = (1u << 30) - 1;

// ---------------------------------------------------------------------------------------------
// 1. All four digit histograms in one read of the keys (privatized per block, merged with one
//    global atomic per non-zero bin).
__global__ void __launch_bounds__(HIST_THREADS)
histogram_all_passes_kernel(const uint32_t* __restrict__ keys, size_t n, uint32_t* __restrict__ ghist)
{
    __shared__ uint32_t h[PASSES][RADIX];
    for (int i = threadIdx.x; i < PASSES * RADIX; i += HIST_THREADS) (&h[0][0])[i] = 0;
    __syncthreads();

    const size_t n4 = n >> 2;
    const uint4* k4 = reinterpret_cast<const uint4*>(keys);
    const size_t stride = (size_t)gridDim.x * HIST_THREADS;
    for (size_t i = (size_t)blockIdx.x * HIST_THREADS + threadIdx.x; i < n4; i += stride) {
        const uint4 k = __ldg(k4 + i);
        const uint32_t kk[4] = {k.x, k.y, k.z, k.w};
#pragma unroll
        for (int e = 0; e < 4; ++e)
#pragma unroll
            for (int p = 0; p < PASSES; ++p)
                atomicAdd(&h[p][(kk[e] >> (p * RADIX_BITS)) & (RADIX - 1)], 1u);
    }
    if (blockIdx.x == 0)                                   // tail keys (n % 4)
        for (size_t i = (n4 << 2) + threadIdx.x; i < n; i += HIST_THREADS) {
            const uint32_t k = __ldg(keys + i);
#pragma unroll
            for (int p = 0; p < PASSES; ++p) atomicAdd(&h[p][(k >> (p * RADIX_BITS)) & (RADIX - 1)], 1u);
        }
    __syncthreads();
    for (int i = threadIdx.x; i < PASSES * RADIX; i += HIST_THREADS) {
        const uint32_t c = (&h[0][0])[i];
        if (c) atomicAdd(ghist + i, c);
    }
}

// ---------------------------------------------------------------------------------------------
// 2. One pass: rank, look-back, scatter.
struct SweepSmem {
    uint32_t keys[TILE];                  // the tile, sorted by digit (stable)
    uint32_t warp_cnt[WARPS][RADIX];      // per-warp digit counters, then per-warp exclusive prefixes
    uint32_t local_start[RADIX];          // exclusive scan of the tile's digit counts
    uint32_t global_start[RADIX];         // exclusive scan of the global digit histogram
    uint32_t scatter_base[RADIX];         // output offset of a digit minus its local start
    uint32_t warp_tot[2][RADIX / 32];
    int tile;
};

__device__ __forceinline__ void st_relaxed(uint32_t* p, uint32_t v)
{
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;\n" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t ld_relaxed(const uint32_t* p)
{
    uint32_t v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__global__ void __launch_bounds__(THREADS, 2)
onesweep_pass_kernel(const uint32_t* __restrict__ in, uint32_t* __restrict__ out, size_t n, int shift,
                     const uint32_t* __restrict__ ghist,     // this pass's 256 global counts
                     uint32_t* __restrict__ status,          // [tiles][256] look-back words (zeroed)
                     uint32_t* __restrict__ tile_counter)
{
    extern __shared__ __align__(16) uint8_t smem_raw[];
    SweepSmem& sm = *reinterpret_cast<SweepSmem*>(smem_raw);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    if (tid == 0) sm.tile = (int)atomicAdd(tile_counter, 1u);     // start-ordered tile ids
    for (int i = lane; i < RADIX; i += 32) sm.warp_cnt[warp][i] = 0;
    __syncthreads();
    const int tile = sm.tile;
    const size_t tile_base = (size_t)tile * TILE;
    const uint32_t valid = (uint32_t)min((size_t)TILE, n - tile_base);

    // warp-striped coalesced loads: warp w owns keys [w*512, w*512 + 512) of the tile, in order
    uint32_t key[KPT], dig[KPT];
#pragma unroll
    for (int i = 0; i < KPT; ++i) {
        const uint32_t li = warp * (KPT * 32) + i * 32 + lane;
        key[i] = li < valid ? __ldg(in + tile_base + li) : 0xffffffffu;
        dig[i] = li < valid ? ((key[i] >> shift) & (RADIX - 1)) : RADIX;   // RADIX marks padding
    }

    // stable per-warp ranking: lanes holding the same digit are grouped by match_any, the highest
    // lane of each group bumps the warp's counter for that digit
    uint32_t* cnt = sm.warp_cnt[warp];
    const uint32_t lt = (1u << lane) - 1u;
    uint32_t rank[KPT];
#pragma unroll
    for (int i = 0; i < KPT; ++i) {
        const uint32_t peers = __match_any_sync(FULL, dig[i]);
        const int leader = 31 - __clz(peers);
        uint32_t before = 0;
        if (lane == leader && dig[i] < RADIX) {
            before = cnt[dig[i]];
            cnt[dig[i]] = before + __popc(peers);
        }
        before = __shfl_sync(FULL, before, leader);
        rank[i] = before + __popc(peers & lt);
        __syncwarp();
    }
    __syncthreads();

    // per digit: exclusive prefix over warps (in place) and the tile's count; publish it at once
    uint32_t tile_count = 0;
    if (tid < RADIX) {
#pragma unroll
        for (int w = 0; w < WARPS; ++w) {
            const uint32_t c = sm.warp_cnt[w][tid];
            sm.warp_cnt[w][tid] = tile_count;
            tile_count += c;
        }
        st_relaxed(status + (size_t)tile * RADIX + tid, (tile == 0 ? FLAG_INC : FLAG_AGG) | tile_count);
    }

    // block-wide exclusive scans over the 256 digits: tile counts and the global histogram
    uint32_t loc = 0, glo = 0;
    if (tid < RADIX) {
        loc = tile_count;
        glo = __ldg(ghist + tid);
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const uint32_t a = __shfl_up_sync(FULL, loc, o), b = __shfl_up_sync(FULL, glo, o);
            if (lane >= o) { loc += a; glo += b; }
        }
        if (lane == 31) { sm.warp_tot[0][warp] = loc; sm.warp_tot[1][warp] = glo; }
    }
    __syncthreads();
    if (tid < RADIX) {
        uint32_t lo = 0, go = 0;
#pragma unroll
        for (int w = 0; w < RADIX / 32; ++w)
            if (w < warp) { lo += sm.warp_tot[0][w]; go += sm.warp_tot[1][w]; }
        sm.local_start[tid]  = lo + loc - tile_count;
        sm.global_start[tid] = go + glo - __ldg(ghist + tid);
    }
    __syncthreads();

    // place every key at its digit-sorted slot inside the tile
#pragma unroll
    for (int i = 0; i < KPT; ++i)
        if (dig[i] < RADIX)
            sm.keys[sm.local_start[dig[i]] + sm.warp_cnt[warp][dig[i]] + rank[i]] = key[i];

    // decoupled look-back per digit over the preceding tiles
    if (tid < RADIX) {
        uint32_t excl = 0;
        if (tile > 0) {
            const uint32_t* sp = status + tid;
            for (int p = tile - 1; p >= 0; --p) {
                uint32_t w;
                do { w = ld_relaxed(sp + (size_t)p * RADIX); } while ((w & ~VALUE_MASK) == 0);
                excl += w & VALUE_MASK;
                if ((w & ~VALUE_MASK) == FLAG_INC) break;
            }
            st_relaxed(status + (size_t)tile * RADIX + tid, FLAG_INC | (excl + tile_count));
        }
        sm.scatter_base[tid] = sm.global_start[tid] + excl - sm.local_start[tid];
    }
    __syncthreads();

    // write out: consecutive threads write consecutive keys of the same digit run
    for (uint32_t j = tid; j < valid; j += THREADS) {
        const uint32_t k = sm.keys[j];
        out[sm.scatter_base[(k >> shift) & (RADIX - 1)] + j] = k;
    }
}

} // namespace

// Sorts d_keys[0..n) ascending in place; d_tmp is an n-key ping-pong buffer. n < 2^30, d_keys 16-byte aligned.
extern "C" cudaError_t radix_sort_u32(uint32_t* d_keys, uint32_t* d_tmp, size_t n, cudaStream_t stream)
{
    if (n <= 1) return cudaSuccess;
    if (n >= (size_t)VALUE_MASK) return cudaErrorInvalidValue;
    if (reinterpret_cast<uintptr_t>(d_keys) & 15) return cudaErrorMisalignedAddress;   // uint4 histogram reads
    const size_t tiles = (n + TILE - 1) / TILE;

    // scratch: histograms, tile counters and look-back words of all passes, cleared by one memset
    const size_t hist_bytes   = sizeof(uint32_t) * PASSES * RADIX;
    const size_t ctr_bytes    = sizeof(uint32_t) * PASSES * 4;
    const size_t status_bytes = sizeof(uint32_t) * (size_t)PASSES * tiles * RADIX;
    uint8_t* scratch = nullptr;
    cudaError_t err = cudaMallocAsync(&scratch, hist_bytes + ctr_bytes + status_bytes, stream);
    if (err != cudaSuccess) return err;
    uint32_t* ghist    = reinterpret_cast<uint32_t*>(scratch);
    uint32_t* counters = reinterpret_cast<uint32_t*>(scratch + hist_bytes);
    uint32_t* status   = reinterpret_cast<uint32_t*>(scratch + hist_bytes + ctr_bytes);
    cudaMemsetAsync(scratch, 0, hist_bytes + ctr_bytes + status_bytes, stream);

    int dev = 0, sms = 0, per_sm = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, histogram_all_passes_kernel, HIST_THREADS, 0);
    const size_t want = (n / 4 + HIST_THREADS - 1) / HIST_THREADS;
    const int hgrid = (int)std::max<size_t>(1, std::min<size_t>(want, (size_t)sms * std::max(per_sm, 1)));
    histogram_all_passes_kernel<<<hgrid, HIST_THREADS, 0, stream>>>(d_keys, n, ghist);

    const int smem = (int)sizeof(SweepSmem);
    cudaFuncSetAttribute(onesweep_pass_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    uint32_t* src = d_keys;
    uint32_t* dst = d_tmp;
    for (int p = 0; p < PASSES; ++p) {
        onesweep_pass_kernel<<<(unsigned)tiles, THREADS, smem, stream>>>(
            src, dst, n, p * RADIX_BITS, ghist + p * RADIX, status + (size_t)p * tiles * RADIX, counters + p * 4);
        std::swap(src, dst);
    }
    err = cudaGetLastError();
    cudaFreeAsync(scratch, stream);
    return err;                                  // PASSES is even: the result is back in d_keys
}
