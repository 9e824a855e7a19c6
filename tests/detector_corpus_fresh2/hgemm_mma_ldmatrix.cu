// features: tensor_cores_mma, cp_async, double_buffering, smem_tiling, bank_conflict_padding, block_rasterization, vector_loads, coalesced_access, loop_unrolling, occupancy_tuning, readonly_cache, reduced_precision
// case: fp16 GEMM 4096^3 with mma.sync m16n8k16 fed by ldmatrix (.trans for B) from XOR-swizzled shared tiles, a 4-stage cp.async ring, 128x256x32 block tiles of eight 64x64 warps, grouped tile rasterization, and an fp16 epilogue staged through padded shared memory for 16-byte stores.
// C = A B, A (M x K) and B (K x N) row-major fp16, fp32 accumulation, C (M x N) row-major fp16.
// mma.sync m16n8k16 fed by ldmatrix (A: .x4, B: .x4.trans) from XOR-swizzled shared tiles,
// 4-stage cp.async pipeline, 128x256x32 block tile, 8 warps of 64x64, grouped tile order for L2 reuse,
// epilogue staged through padded shared memory for 16-byte coalesced stores. Tuned for 4096^3.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cstdint>

namespace {

constexpr int BM = 128, BN = 256, BK = 32;
constexpr int STAGES = 4;
constexpr int THREADS = 256;            // 8 warps: 2 (M) x 4 (N), 64 x 64 each
constexpr int WM = 64, WN = 64;
constexpr int GROUP_M = 8;              // tile rows per raster band
constexpr int A_STAGE = BM * BK;        // halfs
constexpr int B_STAGE = BK * BN;
constexpr int SMEM_BYTES = STAGES * (A_STAGE + B_STAGE) * 2;   // 96 KB
constexpr int C_LD = BN + 8;            // padded epilogue row (halfs)
static_assert(BM * C_LD * 2 <= SMEM_BYTES, "epilogue tile must fit");

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 16-byte unit offsets inside a stage (XOR swizzles: conflict-free cp.async stores and ldmatrix reads)
__device__ __forceinline__ int a_unit(int r, int c) { return r * (BK / 8) + (c ^ ((r >> 1) & 3)); }  // c in 0..3
__device__ __forceinline__ int b_unit(int k, int c) { return k * (BN / 8) + (c ^ (k & 7)); }         // c in 0..31

__global__ void __launch_bounds__(THREADS, 1)
hgemm_kernel(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K) {
    extern __shared__ __align__(128) unsigned char smem[];
    __half* sA = reinterpret_cast<__half*>(smem);
    __half* sB = sA + STAGES * A_STAGE;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3;

    // grouped (banded) tile order: consecutive blocks share A rows and B columns in L2
    const int tiles_m = M / BM, tiles_n = N / BN;
    const int pid = blockIdx.x;
    const int per_group = GROUP_M * tiles_n;
    const int first_m = (pid / per_group) * GROUP_M;
    const int gsize = min(tiles_m - first_m, GROUP_M);
    const int tile_m = first_m + (pid % per_group) % gsize;
    const int tile_n = (pid % per_group) / gsize;
    const int m0 = tile_m * BM, n0 = tile_n * BN;

    const __half* Ablk = A + (size_t)m0 * K;
    const __half* Bblk = B + n0;
    const uint32_t sA_u = smem_u32(sA), sB_u = smem_u32(sB);

    auto load_stage = [&](int stage, int kt) {
        const int k0 = kt * BK;
        const uint32_t a_base = sA_u + stage * A_STAGE * 2;
        const uint32_t b_base = sB_u + stage * B_STAGE * 2;
#pragma unroll
        for (int i = 0; i < (BM * BK / 8) / THREADS; ++i) {   // 2
            const int idx = tid + i * THREADS;
            const int r = idx >> 2, c = idx & 3;
            cp_async16(a_base + a_unit(r, c) * 16, Ablk + (size_t)r * K + k0 + c * 8);
        }
#pragma unroll
        for (int i = 0; i < (BK * BN / 8) / THREADS; ++i) {   // 4
            const int idx = tid + i * THREADS;
            const int kr = idx >> 5, c = idx & 31;
            cp_async16(b_base + b_unit(kr, c) * 16, Bblk + (size_t)(k0 + kr) * N + c * 8);
        }
    };

    float acc[4][8][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

    const int ktiles = K / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ktiles) load_stage(s, s);
        cp_async_commit();
    }

#pragma unroll 1
    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<STAGES - 2>();   // stage kt landed; up to STAGES-2 newer copies stay in flight
        __syncthreads();               // ... and everyone finished reading the stage refilled below
        const int nk = kt + STAGES - 1;
        if (nk < ktiles) load_stage(nk % STAGES, nk);
        cp_async_commit();

        const int stage = kt % STAGES;
        const uint32_t a_base = sA_u + stage * A_STAGE * 2;
        const uint32_t b_base = sB_u + stage * B_STAGE * 2;
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            uint32_t af[4][4], bf[4][4];
#pragma unroll
            for (int mi = 0; mi < 4; ++mi) {
                const int r = wm * WM + mi * 16 + (lane & 15);
                const int c = kk * 2 + (lane >> 4);
                ldmatrix_x4(af[mi], a_base + a_unit(r, c) * 16);
            }
#pragma unroll
            for (int nj = 0; nj < 4; ++nj) {
                const int k = kk * 16 + (lane & 15);
                const int c = (wn * WN + nj * 16) / 8 + (lane >> 4);
                ldmatrix_x4_trans(bf[nj], b_base + b_unit(k, c) * 16);
            }
#pragma unroll
            for (int mi = 0; mi < 4; ++mi)
#pragma unroll
                for (int nj = 0; nj < 4; ++nj) {
                    mma16816(acc[mi][2 * nj], af[mi], bf[nj][0], bf[nj][1]);
                    mma16816(acc[mi][2 * nj + 1], af[mi], bf[nj][2], bf[nj][3]);
                }
        }
    }
    cp_async_wait<0>();
    __syncthreads();

    // epilogue: fp32 -> fp16 into a padded shared tile, then 16-byte coalesced stores
    __half* sC = reinterpret_cast<__half*>(smem);
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 8; ++ni) {
            const int r = wm * WM + mi * 16 + g;
            const int c = wn * WN + ni * 8 + 2 * t;
            *reinterpret_cast<__half2*>(sC + r * C_LD + c) = __floats2half2_rn(acc[mi][ni][0], acc[mi][ni][1]);
            *reinterpret_cast<__half2*>(sC + (r + 8) * C_LD + c) = __floats2half2_rn(acc[mi][ni][2], acc[mi][ni][3]);
        }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < (BM * BN / 8) / THREADS; ++i) {   // 16
        const int idx = tid + i * THREADS;
        const int r = idx >> 5, c = (idx & 31) * 8;
        const uint4 v = *reinterpret_cast<const uint4*>(sC + r * C_LD + c);
        *reinterpret_cast<uint4*>(C + (size_t)(m0 + r) * N + n0 + c) = v;
    }
}

}  // namespace

// Requires M % 128 == 0, N % 256 == 0, K % 32 == 0 and 16-byte aligned rows.
extern "C" cudaError_t hgemm_mma_ldmatrix(const __half* A, const __half* B, __half* C, int M, int N, int K,
                                          cudaStream_t stream) {
    if (M % BM || N % BN || K % BK) return cudaErrorInvalidValue;
    static bool attr_set = false;
    if (!attr_set) {
        cudaError_t e = cudaFuncSetAttribute(hgemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
        if (e != cudaSuccess) return e;
        attr_set = true;
    }
    const int grid = (M / BM) * (N / BN);
    hgemm_kernel<<<grid, THREADS, SMEM_BYTES, stream>>>(A, B, C, M, N, K);
    return cudaGetLastError();
}
