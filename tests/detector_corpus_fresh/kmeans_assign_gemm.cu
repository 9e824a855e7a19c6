// features: distance_as_gemm, tensor_cores_split_fp16, tensor_cores_mma, reduced_precision, cp_async, double_buffering, persistent_kernel, smem_tiling, bank_conflict_padding, vector_loads, coalesced_access, warp_shuffle, block_reduction_tree, loop_unrolling, readonly_cache, launch_config_tuning, occupancy_tuning
// case: k-means assignment of 1M points (d = 64) to 256 centroids: argmin_c |c|^2 - 2 x.c with the cross term on fp16 tensor cores (mma.sync m16n8k16) as 3xFP16 (power-of-two scaled hi/lo splits of points and centroids, the centroid splits resident in swizzled shared memory), persistent CTAs streaming 128-point fp32 tiles through a two-stage cp.async ring.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <math.h>
#include <algorithm>

namespace {

constexpr int D       = 64;                 // dimension (compile-time)
constexpr int KC      = 256;                // centroid slots (k <= 256; unused slots never win)
constexpr int TM      = 128;                // points per tile
constexpr int THREADS = 256;                // 8 warps: 4 along points (32 rows) x 2 along centroids (128)
constexpr int WARPS   = THREADS / 32;
constexpr int XS      = D + 8;              // padded fp32 row stride of the point tile (conflict-free float2 reads)
constexpr int STAGES  = 2;
constexpr float LO_SCALE = 2048.f;          // 2^11: the residual is stored scaled into fp16's range
constexpr unsigned FULL = 0xffffffffu;

struct Smem {
    __half bh[KC * D];                      // centroid hi parts, [n][k], 16-byte chunks XOR-swizzled by (n & 7)
    __half bl[KC * D];                      // centroid lo parts (x 2^11)
    float  x[STAGES][TM * XS];              // fp32 point tiles
    float  cnorm[KC];                       // |c|^2 in fp32 (+inf for unused slots)
    float  red_d[2][TM];                    // per-row best distance of each centroid half
    int    red_i[2][TM];
    float  xnorm[TM];
    float  wmax[WARPS];
    int    cshift;
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void mma_16816(float* d, const uint32_t* a, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ int bswz(int n, int k) { return n * D + ((((k >> 3) ^ (n & 7))) << 3) + (k & 7); }

// power-of-two exponent that brings max|v| into [2^13, 2^14): keeps hi and the scaled residual inside fp16
__device__ __forceinline__ int scale_shift(float mx)
{
    if (!(mx > 0.f)) return 0;
    const int e = ((__float_as_int(mx) >> 23) & 0xff) - 127;
    return max(-100, min(100, 13 - e));
}

__device__ __forceinline__ uint32_t pack_half2(__half2 h) { return *reinterpret_cast<uint32_t*>(&h); }

// split a scaled pair into fp16 hi and fp16 (residual * 2^11)
__device__ __forceinline__ void split2(float a, float b, uint32_t& hi, uint32_t& lo)
{
    const __half2 h = __floats2half2_rn(a, b);
    const float2 hf = __half22float2(h);
    hi = pack_half2(h);
    lo = pack_half2(__floats2half2_rn((a - hf.x) * LO_SCALE, (b - hf.y) * LO_SCALE));
}

__global__ void __launch_bounds__(THREADS, 1)
kmeans_assign_kernel(const float* __restrict__ X, int n, const float* __restrict__ cent, int k,
                     int* __restrict__ out_idx, float* __restrict__ out_dist)
{
    extern __shared__ __align__(128) uint8_t smem_raw[];
    Smem& sm = *reinterpret_cast<Smem*>(smem_raw);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp & 3, wn = warp >> 2;
    const int g = lane >> 2, q = lane & 3;
    const int ntiles = (n + TM - 1) / TM;

    auto issue_tile = [&](int tile, int stage) {
        const int p0 = tile * TM;
        float* dst = sm.x[stage];
#pragma unroll
        for (int i = 0; i < (TM * D / 4) / THREADS; ++i) {        // 8 x 16 bytes per thread
            const int c = tid + i * THREADS, r = c >> 4, ch = c & 15;
            const bool ok = p0 + r < n;
            cp_async16(smem_u32(dst + r * XS + ch * 4), ok ? X + (size_t)(p0 + r) * D + ch * 4 : X, ok);
        }
    };

    // start the first tile's copy, then prepare the centroids while it lands
    if ((int)blockIdx.x < ntiles) issue_tile(blockIdx.x, 0);
    cp_async_commit();

    // ---- centroids: global max |c| (block reduction) -> power-of-two scale -> hi/lo split, norms ----
    {
        float mx = 0.f;
        for (int i = tid; i < k * D; i += THREADS) mx = fmaxf(mx, fabsf(__ldg(cent + i)));
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, o));
        if (lane == 0) sm.wmax[warp] = mx;
        __syncthreads();
        if (warp == 0) {
            mx = lane < WARPS ? sm.wmax[lane] : 0.f;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, o));
            if (lane == 0) sm.cshift = scale_shift(mx);
        }
        __syncthreads();
        const float sc = ldexpf(1.f, sm.cshift);
        for (int i = tid * 2; i < KC * D; i += THREADS * 2) {
            const int c = i / D, kk = i % D;
            float a = 0.f, b = 0.f;
            if (c < k) { const float2 v = __ldg(reinterpret_cast<const float2*>(cent + i)); a = v.x * sc; b = v.y * sc; }
            uint32_t hi, lo;
            split2(a, b, hi, lo);
            *reinterpret_cast<uint32_t*>(&sm.bh[bswz(c, kk)]) = hi;
            *reinterpret_cast<uint32_t*>(&sm.bl[bswz(c, kk)]) = lo;
        }
        for (int c = warp; c < KC; c += WARPS) {
            float s = 0.f;
            if (c < k) {
                const float a = __ldg(cent + c * D + lane), b = __ldg(cent + c * D + lane + 32);
                s = fmaf(a, a, b * b);
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
            if (lane == 0) sm.cnorm[c] = c < k ? s : INFINITY;
        }
    }
    const int cshift = sm.cshift;
    __syncthreads();

    int it = 0;
    for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x, ++it) {
        const int stage = it & 1;
        const int next = tile + gridDim.x;
        if (next < ntiles) issue_tile(next, stage ^ 1);        // the other stage was freed last iteration
        cp_async_commit();
        cp_async_wait<1>();                                      // this tile's copies are done
        __syncthreads();

        const float* xs = sm.x[stage];

        // ---- A fragments: per-row max / norm (quad shuffles), power-of-two scale, hi/lo split ----
        uint32_t ah[2][4][4], al[2][4][4];
        float inv[2][2], xn[2][2];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
            int shr[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const float* rp = xs + (wm * 32 + mi * 16 + g + h * 8) * XS + 2 * q;
                float m = 0.f, s = 0.f;
#pragma unroll
                for (int ks = 0; ks < 4; ++ks) {
                    const float2 a = *reinterpret_cast<const float2*>(rp + ks * 16);
                    const float2 b = *reinterpret_cast<const float2*>(rp + ks * 16 + 8);
                    m = fmaxf(m, fmaxf(fmaxf(fabsf(a.x), fabsf(a.y)), fmaxf(fabsf(b.x), fabsf(b.y))));
                    s = fmaf(a.x, a.x, fmaf(a.y, a.y, fmaf(b.x, b.x, fmaf(b.y, b.y, s))));
                }
#pragma unroll
                for (int o = 1; o < 4; o <<= 1) {
                    m = fmaxf(m, __shfl_xor_sync(FULL, m, o));
                    s += __shfl_xor_sync(FULL, s, o);
                }
                shr[h] = scale_shift(m);
                inv[mi][h] = ldexpf(1.f, -(shr[h] + cshift));
                xn[mi][h] = s;
            }
            const float s0 = ldexpf(1.f, shr[0]), s1 = ldexpf(1.f, shr[1]);
#pragma unroll
            for (int ks = 0; ks < 4; ++ks)
#pragma unroll
                for (int r = 0; r < 4; ++r) {      // a0: (g, 2q) a1: (g+8, 2q) a2: (g, 2q+8) a3: (g+8, 2q+8)
                    const int row = wm * 32 + mi * 16 + g + (r & 1) * 8;
                    const float2 v = *reinterpret_cast<const float2*>(xs + row * XS + ks * 16 + (r >> 1) * 8 + 2 * q);
                    const float sr = (r & 1) ? s1 : s0;
                    split2(v.x * sr, v.y * sr, ah[mi][ks][r], al[mi][ks][r]);
                }
        }

        float best[2][2];
        int bidx[2][2];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) { best[mi][h] = INFINITY; bidx[mi][h] = 0; }

        // ---- sweep this warp's 128 centroids, 16 at a time: x.c = hi.hi + 2^-11 (hi.lo + lo.hi) ----
#pragma unroll 1
        for (int nb = 0; nb < 8; ++nb) {
            const int cb = wn * 128 + nb * 16;
            float accB[2][2][4], accS[2][2][4];
#pragma unroll
            for (int mi = 0; mi < 2; ++mi)
#pragma unroll
                for (int ni = 0; ni < 2; ++ni)
#pragma unroll
                    for (int e = 0; e < 4; ++e) { accB[mi][ni][e] = 0.f; accS[mi][ni][e] = 0.f; }
#pragma unroll
            for (int ks = 0; ks < 4; ++ks) {
                const int nrow = cb + (lane & 7) + ((lane >> 4) << 3);
                const int kcol = ks * 16 + ((lane >> 3) & 1) * 8;
                uint32_t bh[4], bl[4];
                ldmatrix_x4(smem_u32(&sm.bh[bswz(nrow, kcol)]), bh[0], bh[1], bh[2], bh[3]);
                ldmatrix_x4(smem_u32(&sm.bl[bswz(nrow, kcol)]), bl[0], bl[1], bl[2], bl[3]);
#pragma unroll
                for (int mi = 0; mi < 2; ++mi)
#pragma unroll
                    for (int ni = 0; ni < 2; ++ni) {
                        mma_16816(accS[mi][ni], ah[mi][ks], bl[2 * ni], bl[2 * ni + 1]);   // small terms first
                        mma_16816(accS[mi][ni], al[mi][ks], bh[2 * ni], bh[2 * ni + 1]);
                        mma_16816(accB[mi][ni], ah[mi][ks], bh[2 * ni], bh[2 * ni + 1]);
                    }
            }
#pragma unroll
            for (int mi = 0; mi < 2; ++mi)
#pragma unroll
                for (int ni = 0; ni < 2; ++ni)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int h = e >> 1;
                        const int col = cb + ni * 8 + 2 * q + (e & 1);
                        const float dot = fmaf(accS[mi][ni][e], 1.f / LO_SCALE, accB[mi][ni][e]) * inv[mi][h];
                        const float d = fmaf(-2.f, dot, sm.cnorm[col]);
                        if (d < best[mi][h]) { best[mi][h] = d; bidx[mi][h] = col; }   // columns rise: first min kept
                    }
        }

        // ---- argmin across the quad, then across the two centroid halves ----
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float bd = best[mi][h];
                int bi = bidx[mi][h];
#pragma unroll
                for (int o = 1; o < 4; o <<= 1) {
                    const float od = __shfl_xor_sync(FULL, bd, o);
                    const int oi = __shfl_xor_sync(FULL, bi, o);
                    if (od < bd || (od == bd && oi < bi)) { bd = od; bi = oi; }
                }
                if (q == 0) {
                    const int row = wm * 32 + mi * 16 + g + h * 8;
                    sm.red_d[wn][row] = bd;
                    sm.red_i[wn][row] = bi;
                    if (wn == 0) sm.xnorm[row] = xn[mi][h];
                }
            }
        __syncthreads();
        if (tid < TM) {
            const int p = tile * TM + tid;
            if (p < n) {
                const float d0 = sm.red_d[0][tid], d1 = sm.red_d[1][tid];
                const bool second = d1 < d0;                  // ties keep the lower index
                out_idx[p] = second ? sm.red_i[1][tid] : sm.red_i[0][tid];
                if (out_dist) out_dist[p] = fmaxf(sm.xnorm[tid] + (second ? d1 : d0), 0.f);
            }
        }
    }
    cp_async_wait<0>();
}

} // namespace

// idx[i] = argmin_c |X[i] - C[c]|^2 (and optionally that squared distance); X: n x 64, C: k x 64 (k <= 256), fp32.
extern "C" cudaError_t kmeans_assign(const float* d_X, int n, const float* d_C, int k,
                                     int* d_idx, float* d_dist, cudaStream_t stream)
{
    if (n <= 0) return cudaSuccess;
    if (k <= 0 || k > KC || (reinterpret_cast<uintptr_t>(d_X) & 15) || (reinterpret_cast<uintptr_t>(d_C) & 7))
        return cudaErrorInvalidValue;
    const int smem = (int)sizeof(Smem);
    cudaFuncSetAttribute(kmeans_assign_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    int dev = 0, sms = 0, per_sm = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kmeans_assign_kernel, THREADS, smem);
    const int ntiles = (n + TM - 1) / TM;
    const int grid = std::max(1, std::min(ntiles, sms * std::max(per_sm, 1)));
    kmeans_assign_kernel<<<grid, THREADS, smem, stream>>>(d_X, n, d_C, k, d_idx, d_dist);
    return cudaGetLastError();
}
