// features: tensor_cores_mma, cp_async, double_buffering, persistent_kernel, block_rasterization, bank_conflict_padding, smem_tiling, vector_loads, coalesced_access, warp_shuffle, loop_unrolling, readonly_cache, launch_config_tuning, occupancy_tuning
// case: 64 independent fp16 GEMMs of varied sizes (fp32 accumulate and output) described by device arrays: a device-sized grid of persistent CTAs builds the tile prefix of all problems once in shared memory, then takes 128x128 output tiles from a global atomic ticket (grouped tile order inside each problem), feeding mma.sync m16n8k16 from XOR-swizzled ldmatrix tiles through a 4-stage cp.async ring.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <algorithm>

namespace {

constexpr int BM = 128, BN = 128, BK = 32;
constexpr int STAGES  = 4;
constexpr int THREADS = 256;                         // 8 warps: 2 (M) x 4 (N), each 64 x 32
constexpr int GROUP_M = 8;                           // tile rows per raster band
constexpr int MAX_GROUPS = 256;
constexpr int A_STAGE = BM * BK;                     // halves
constexpr int B_STAGE = BK * BN;                     // halves
constexpr int SMEM_BYTES = STAGES * (A_STAGE + B_STAGE) * 2;   // 64 KB
constexpr unsigned FULL = 0xffffffffu;

__device__ int g_tile_ticket;                        // reset by the host before each launch

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
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void mma_16816(float* d, const uint32_t* a, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Shared layouts (16-byte chunks XOR-swizzled so that every ldmatrix phase hits 32 distinct banks):
//   A stage: [BM][BK] halves, 4 chunks per row, chunk' = chunk ^ ((row >> 1) & 3)
//   B stage: [BK][BN] halves, 16 chunks per row, chunk' = chunk ^ (row & 7)
__device__ __forceinline__ int a_off(int row, int chunk) { return row * BK + ((chunk ^ ((row >> 1) & 3)) << 3); }
__device__ __forceinline__ int b_off(int row, int chunk) { return row * BN + ((chunk ^ (row & 7)) << 3); }

__device__ __forceinline__ void load_stage(__half* sA, __half* sB, const __half* __restrict__ A, const __half* __restrict__ B,
                                           int M, int N, int K, int m0, int n0, int k0, int tid)
{
#pragma unroll
    for (int i = 0; i < (BM * BK / 8) / THREADS; ++i) {          // 2 chunks of A per thread
        const int c = tid + i * THREADS, r = c >> 2, ch = c & 3;
        const int gr = m0 + r, gk = k0 + ch * 8;
        const bool ok = gr < M && gk < K;
        cp_async16(smem_u32(sA + a_off(r, ch)), ok ? A + (size_t)gr * K + gk : A, ok);
    }
#pragma unroll
    for (int i = 0; i < (BK * BN / 8) / THREADS; ++i) {          // 2 chunks of B per thread
        const int c = tid + i * THREADS, r = c >> 4, ch = c & 15;
        const int gk = k0 + r, gn = n0 + ch * 8;
        const bool ok = gk < K && gn < N;
        cp_async16(smem_u32(sB + b_off(r, ch)), ok ? B + (size_t)gk * N + gn : B, ok);
    }
}

// problems: sizes[g] = (M, N, K); A[g] row-major M x K, B[g] row-major K x N, C[g] row-major M x N (fp32).
// Requires K % 8 == 0, N % 8 == 0 and 16-byte aligned A/B (cp.async 16-byte chunks).
__global__ void __launch_bounds__(THREADS, 2)
grouped_gemm_kernel(int G, const int3* __restrict__ sizes,
                    const __half* const* __restrict__ Aptr, const __half* const* __restrict__ Bptr,
                    float* const* __restrict__ Cptr)
{
    extern __shared__ __align__(128) uint8_t smem_raw[];
    __half* sA = reinterpret_cast<__half*>(smem_raw);
    __half* sB = sA + STAGES * A_STAGE;
    __shared__ int s_start[MAX_GROUPS + 1];          // tile prefix over the problems
    __shared__ int s_ticket[2];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3;

    // ---- once per CTA: tiles per problem and their prefix (one warp, shuffle scan) ----
    if (tid == 0) s_ticket[0] = atomicAdd(&g_tile_ticket, 1);
    if (warp == 0) {
        constexpr int PER = MAX_GROUPS / 32;
        int cnt[PER], run = 0;
#pragma unroll
        for (int i = 0; i < PER; ++i) {
            const int g = lane * PER + i;
            int t = 0;
            if (g < G) { const int3 s = sizes[g]; t = ((s.x + BM - 1) / BM) * ((s.y + BN - 1) / BN); }
            run += t; cnt[i] = run;                                  // inclusive within the lane
        }
        int incl = run;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(FULL, incl, o);
            if (lane >= o) incl += y;
        }
        const int excl = incl - run;
        if (lane == 0) s_start[0] = 0;
#pragma unroll
        for (int i = 0; i < PER; ++i) s_start[lane * PER + i + 1] = excl + cnt[i];
    }
    __syncthreads();
    const int total = s_start[G];

    int it = 0;
    int tile = s_ticket[0];
    while (tile < total) {
        if (tid == 0) s_ticket[(it + 1) & 1] = atomicAdd(&g_tile_ticket, 1);   // next ticket, latency hidden

        // ---- which problem, which tile (binary search in the prefix) ----
        int lo = 0, hi = G - 1;
        while (lo < hi) { const int mid = (lo + hi + 1) >> 1; if (s_start[mid] <= tile) lo = mid; else hi = mid - 1; }
        const int g = lo;
        const int3 sz = sizes[g];
        const int M = sz.x, N = sz.y, K = sz.z;
        const __half* A = Aptr[g];
        const __half* B = Bptr[g];
        float* C = Cptr[g];
        const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
        const int local = tile - s_start[g];
        // grouped raster: GROUP_M tile rows walked column by column, so co-resident CTAs share A and B in L2
        const int per_group = GROUP_M * tiles_n;
        const int first_m = (local / per_group) * GROUP_M;
        const int rows_here = min(tiles_m - first_m, GROUP_M);
        const int tm = first_m + (local % per_group) % rows_here;
        const int tn = (local % per_group) / rows_here;
        const int m0 = tm * BM, n0 = tn * BN;

        float acc[4][4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

        const int KT = (K + BK - 1) / BK;
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < KT) load_stage(sA + s * A_STAGE, sB + s * B_STAGE, A, B, M, N, K, m0, n0, s * BK, tid);
            cp_async_commit();
        }

        for (int kt = 0; kt < KT; ++kt) {
            cp_async_wait<STAGES - 2>();             // stage kt has landed (this thread's copies)
            __syncthreads();                         // ... everyone's, and stage kt-1 is free
            const int pf = kt + STAGES - 1;
            if (pf < KT) load_stage(sA + (pf % STAGES) * A_STAGE, sB + (pf % STAGES) * B_STAGE,
                                    A, B, M, N, K, m0, n0, pf * BK, tid);
            cp_async_commit();

            const __half* a_s = sA + (kt % STAGES) * A_STAGE;
            const __half* b_s = sB + (kt % STAGES) * B_STAGE;
#pragma unroll
            for (int kk = 0; kk < BK; kk += 16) {
                uint32_t af[4][4], bf[4][2];
#pragma unroll
                for (int mi = 0; mi < 4; ++mi) {
                    const int row = wm * 64 + mi * 16 + (lane & 15);
                    const int ch = (kk >> 3) + (lane >> 4);
                    ldmatrix_x4(smem_u32(a_s + a_off(row, ch)), af[mi][0], af[mi][1], af[mi][2], af[mi][3]);
                }
#pragma unroll
                for (int nj = 0; nj < 2; ++nj) {
                    const int krow = kk + (lane & 15);
                    const int ch = ((wn * 32 + nj * 16) >> 3) + (lane >> 4);
                    ldmatrix_x4_trans(smem_u32(b_s + b_off(krow, ch)),
                                      bf[2 * nj][0], bf[2 * nj][1], bf[2 * nj + 1][0], bf[2 * nj + 1][1]);
                }
#pragma unroll
                for (int mi = 0; mi < 4; ++mi)
#pragma unroll
                    for (int ni = 0; ni < 4; ++ni) mma_16816(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
            }
        }
        cp_async_wait<0>();

        // ---- epilogue: fp32 pairs straight from the accumulators ----
        const int g8 = lane >> 2, q = lane & 3;
#pragma unroll
        for (int mi = 0; mi < 4; ++mi)
#pragma unroll
            for (int ni = 0; ni < 4; ++ni) {
                const int col = n0 + wn * 32 + ni * 8 + q * 2;
                const int r0 = m0 + wm * 64 + mi * 16 + g8;
                if (col < N) {
                    if (r0 < M)     *reinterpret_cast<float2*>(C + (size_t)r0 * N + col)       = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
                    if (r0 + 8 < M) *reinterpret_cast<float2*>(C + (size_t)(r0 + 8) * N + col) = make_float2(acc[mi][ni][2], acc[mi][ni][3]);
                }
            }
        __syncthreads();                             // shared stages free, next ticket visible
        ++it;
        tile = s_ticket[it & 1];
    }
}

} // namespace

// Runs G (<= 256) independent GEMMs C[g] = A[g] * B[g]; all arrays live on the device.
extern "C" cudaError_t grouped_gemm_fp16(int G, const int3* d_sizes, const __half* const* d_A,
                                         const __half* const* d_B, float* const* d_C, cudaStream_t stream)
{
    if (G <= 0) return cudaSuccess;
    if (G > MAX_GROUPS) return cudaErrorInvalidValue;
    cudaFuncSetAttribute(grouped_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    int dev = 0, sms = 0, per_sm = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grouped_gemm_kernel, THREADS, SMEM_BYTES);
    const int grid = sms * std::max(per_sm, 1);

    void* ticket = nullptr;
    cudaError_t err = cudaGetSymbolAddress(&ticket, g_tile_ticket);
    if (err != cudaSuccess) return err;
    cudaMemsetAsync(ticket, 0, sizeof(int), stream);
    grouped_gemm_kernel<<<grid, THREADS, SMEM_BYTES, stream>>>(G, d_sizes, d_A, d_B, d_C);
    return cudaGetLastError();
}
