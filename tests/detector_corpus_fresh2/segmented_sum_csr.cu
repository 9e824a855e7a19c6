// features: warp_shuffle, vector_loads, coalesced_access, cache_hints, readonly_cache, loop_unrolling, grid_stride_loop, launch_config_tuning, programmatic_dependent_launch, stream_ordered_alloc
// case: CSR segmented sums by a merge-style equal split: a prep kernel zeroes y and maps each 256-element tile to its first segment, then (launched with PDL, values loaded before the dependency wait) one warp per tile reduces 8 consecutive elements per lane by segment, passes open partials with a shuffle segmented scan, and finishes tile-crossing segments with atomics.
// y[s] = sum of x[off[s] .. off[s+1]) for nseg (1M) segments of uneven length over n (64M) floats.
// Merge-based split: every warp gets an equal tile of 256 elements whatever the segment lengths,
// each lane reduces its 8 consecutive elements by segment, a warp segmented scan (shuffles) passes the
// open partial sums from lane to lane, and segments crossing tile boundaries are finished with atomics.
#include <cuda_runtime.h>
#include <cstdint>

namespace {

constexpr int ITEMS = 8;                 // consecutive elements per lane
constexpr int TILE = 32 * ITEMS;         // elements per warp
constexpr int WPB = 8;                   // warps per block
constexpr int THREADS = WPB * 32;

// Pass 1: zero y and record, for every tile, the segment holding its first element.
__global__ void __launch_bounds__(THREADS)
seg_prep_kernel(const int* __restrict__ off, int nseg, int ntiles, int* __restrict__ tile_seg, float* __restrict__ y) {
    for (int s = blockIdx.x * THREADS + threadIdx.x; s < nseg; s += gridDim.x * THREADS) {
        const int a = __ldg(off + s), b = __ldg(off + s + 1);
        y[s] = 0.f;
        for (int t = (a + TILE - 1) / TILE; t < (b + TILE - 1) / TILE; ++t) tile_seg[t] = s;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) tile_seg[ntiles] = nseg - 1;
}

// Pass 2: one warp per tile.
__global__ void __launch_bounds__(THREADS)
seg_sum_kernel(const float* __restrict__ x, const int* __restrict__ off, const int* __restrict__ tile_seg,
               int n, int nseg, int ntiles, float* __restrict__ y) {
    const int lane = threadIdx.x & 31;
    const int tile = blockIdx.x * WPB + (threadIdx.x >> 5);
    if (tile >= ntiles) return;
    const int base = tile * TILE;
    const int e0 = base + lane * ITEMS;
    const int e_end = min(e0 + ITEMS, n);

    // The loads do not depend on pass 1: issue them before waiting for it (programmatic dependent launch).
    float v[ITEMS];
    if (e0 + ITEMS <= n) {
        const float4* p = reinterpret_cast<const float4*>(x + e0);
        const float4 a = __ldcs(p), b = __ldcs(p + 1);
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) v[k] = (e0 + k < n) ? __ldcs(x + e0 + k) : 0.f;
    }
    cudaGridDependencySynchronize();

    const int s_lo = __ldg(tile_seg + tile);
    const int s_hi = __ldg(tile_seg + tile + 1);

    int s_first = nseg + 1, s = nseg;
    float acc = 0.f, first_val = 0.f;
    int first_seg = -1;
    if (e0 < n) {
        // last segment in [s_lo, s_hi] that starts at or before e0
        int lo = s_lo, hi = s_hi;
        while (lo < hi) {
            const int mid = (lo + hi + 1) >> 1;
            if (__ldg(off + mid) <= e0) lo = mid; else hi = mid - 1;
        }
        s = s_first = lo;
        int next = __ldg(off + s + 1);
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int e = e0 + k;
            if (e < e_end) {
                while (e >= next) {  // segment s ended before e (empty segments are visited and stored as 0)
                    if (first_seg < 0) { first_seg = s; first_val = acc; }
                    else y[s] = acc;  // began and ended inside this lane
                    acc = 0.f;
                    ++s;
                    next = __ldg(off + s + 1);
                }
                acc += v[k];
            }
        }
        if (next == e_end) {  // segment ends exactly at the end of this lane's range
            if (first_seg < 0) { first_seg = s; first_val = acc; }
            else y[s] = acc;
            acc = 0.f;
            ++s;
        }
    }

    // Warp segmented inclusive scan of the open (segment, partial) pairs; keys are non-decreasing by lane.
    int key = s;
    float val = acc;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int ku = __shfl_up_sync(0xffffffffu, key, o);
        const float vu = __shfl_up_sync(0xffffffffu, val, o);
        if (lane >= o && ku == key) val += vu;
    }
    const int ck = __shfl_up_sync(0xffffffffu, key, 1);
    const float cv = __shfl_up_sync(0xffffffffu, val, 1);
    const float carry = (lane > 0 && ck == s_first) ? cv : 0.f;

    if (first_seg >= 0) {
        const float total = first_val + carry;
        if (__ldg(off + first_seg) >= base) y[first_seg] = total;  // whole segment inside this tile
        else atomicAdd(y + first_seg, total);                       // earlier tiles contribute too
    }
    // the segment still open at the end of the tile continues in later tiles
    if (lane == 31 && key < nseg && val != 0.f) atomicAdd(y + key, val);
}

}  // namespace

// off: nseg + 1 ascending offsets with off[0] = 0, off[nseg] = n. x 16-byte aligned.
extern "C" cudaError_t segmented_sum_csr(const float* x, const int* off, int nseg, int n, float* y, cudaStream_t stream) {
    if (nseg <= 0) return cudaSuccess;
    static int* tile_seg = nullptr;   // scratch kept across calls, grown when needed
    static size_t cap = 0;
    static int sms = 0;
    const int ntiles = (n + TILE - 1) / TILE;
    if ((size_t)ntiles + 1 > cap) {
        if (tile_seg) cudaFreeAsync(tile_seg, stream);
        cap = (size_t)ntiles + 1;
        cudaError_t e = cudaMallocAsync(&tile_seg, cap * sizeof(int), stream);
        if (e != cudaSuccess) { tile_seg = nullptr; cap = 0; return e; }
    }
    if (!sms) {
        int dev;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    }
    int g1 = (nseg + THREADS - 1) / THREADS;
    if (g1 > sms * 8) g1 = sms * 8;
    seg_prep_kernel<<<g1, THREADS, 0, stream>>>(off, nseg, ntiles, tile_seg, y);
    if (ntiles == 0) return cudaGetLastError();

    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((ntiles + WPB - 1) / WPB);
    cfg.blockDim = dim3(THREADS);
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, seg_sum_kernel, x, off, (const int*)tile_seg, n, nseg, ntiles, y);
}
