// features: wgmma, tma_bulk_copy, warp_specialization, double_buffering, persistent_kernel, block_rasterization, kernel_fusion, bank_conflict_padding, smem_tiling, reduced_precision, loop_unrolling, readonly_cache, launch_config_tuning, occupancy_tuning
// arch: sm_90a
// case: Y = gelu(X W + b) in bf16 (fp32 accumulate), M = 8192, N = K = 4096, on Hopper: persistent CTAs (one per SM, grouped tile order) of one TMA producer warpgroup and two wgmma consumer warpgroups (setmaxnreg 40 / 232) share a 4-stage 128B-swizzled full/empty mbarrier ring of 128x256x64 tiles, each consumer runs m64n256k16 wgmma's with the row-major W read as an MN-major operand, and applies bias + erf-GELU to the accumulators before bf16 stores while the producer already loads the next tile.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cudaTypedefs.h>
#include <stdint.h>
#include <algorithm>

namespace {

constexpr int BM = 128, BN = 256, BK = 64;
constexpr int STAGES    = 4;
constexpr int CONSUMERS = 2;                                  // consumer warpgroups, 64 rows each
constexpr int THREADS   = 128 * (CONSUMERS + 1);              // + one producer warpgroup
constexpr int GROUP_M   = 16;                                 // tile rows per raster band (L2 reuse)
constexpr int A_BYTES   = BM * BK * 2;                        // 16 KB: [128 rows][64 k], 128B rows, swizzled
constexpr int B_CHUNK   = BK * 64 * 2;                        // 8 KB: [64 k][64 n] block of W, swizzled
constexpr int B_BYTES   = BK * BN * 2;                        // 32 KB: four n-chunks
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;                // 48 KB
constexpr int SMEM_BYTES  = STAGES * STAGE_BYTES + 1024;      // + 1024-byte alignment slack

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity)
{
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "WAIT_LOOP:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra WAIT_LOOP;\n"
        "}\n" :: "r"(smem_u32(bar)), "r"(parity) : "memory");
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
        :: "r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1) : "memory");
}

// wgmma shared-memory descriptor, 128-byte swizzle (layout type 1 in bits 62-63)
__device__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t lbo_bytes, uint32_t sbo_bytes)
{
    uint64_t d = 0;
    d |= (uint64_t)((addr & 0x3FFFF) >> 4);
    d |= (uint64_t)((lbo_bytes >> 4) & 0x3FFF) << 16;
    d |= (uint64_t)((sbo_bytes >> 4) & 0x3FFF) << 32;
    d |= (uint64_t)1 << 62;
    return d;
}

__device__ __forceinline__ void wgmma_fence()  { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait()   { asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory"); }

__device__ __forceinline__ void wgmma_m64n256k16_bf16(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d)
{
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{"
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
        "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
        "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
        "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
        "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"
        "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,"
        "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
        "}, "
        "%128, %129, p, 1, 1, 0, 1;\n"   // scale-a 1, scale-b 1, A K-major (0), B MN-major (1)
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void tile_coords(int tile, int tiles_m, int tiles_n, int& tm, int& tn)
{
    const int per_group = GROUP_M * tiles_n;
    const int first_m = (tile / per_group) * GROUP_M;
    const int rows = min(tiles_m - first_m, GROUP_M);
    const int r = tile % per_group;
    tm = first_m + r % rows;
    tn = r / rows;
}

__device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); }

__global__ void __launch_bounds__(THREADS, 1)
gemm_bias_gelu_kernel(const __grid_constant__ CUtensorMap tmX,    // X [M][K] bf16, box {64 k, 128 m}
                      const __grid_constant__ CUtensorMap tmW,    // W [K][N] bf16, box {64 n, 64 k}
                      const __nv_bfloat16* __restrict__ bias,     // [N]
                      __nv_bfloat16* __restrict__ Y,              // [M][N]
                      int M, int N, int K)
{
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];

    const int wg = threadIdx.x / 128;
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int ntiles = tiles_m * tiles_n;
    const int KB = (K + BK - 1) / BK;

    if (threadIdx.x == 0) {
        asm volatile("prefetch.tensormap [%0];\n" :: "l"(reinterpret_cast<uint64_t>(&tmX)) : "memory");
        asm volatile("prefetch.tensormap [%0];\n" :: "l"(reinterpret_cast<uint64_t>(&tmW)) : "memory");
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);                     // producer's arrive + transaction bytes
            mbar_init(&empty[s], CONSUMERS * 4);        // one arrive per consumer warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        // ======================= producer warpgroup =======================
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (threadIdx.x == 0) {
            int stage = 0;
            uint32_t phase = 0;
            for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
                int tm, tn;
                tile_coords(tile, tiles_m, tiles_n, tm, tn);
                for (int kb = 0; kb < KB; ++kb) {
                    mbar_wait(&empty[stage], phase ^ 1);            // fresh barriers pass at once
                    const uint32_t sbase = smem_u32(smem + stage * STAGE_BYTES);
                    mbar_arrive_expect_tx(&full[stage], STAGE_BYTES);
                    tma_load_2d(sbase, &tmX, &full[stage], kb * BK, tm * BM);
#pragma unroll
                    for (int c = 0; c < BN / 64; ++c)
                        tma_load_2d(sbase + A_BYTES + c * B_CHUNK, &tmW, &full[stage], tn * BN + c * 64, kb * BK);
                    if (++stage == STAGES) { stage = 0; phase ^= 1; }
                }
            }
        }
    } else {
        // ======================= consumer warpgroups =======================
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int cons = wg - 1;
        const int t = threadIdx.x - 128 * wg;           // 0..127 inside the warpgroup
        const int warp = t >> 5, lane = t & 31;
        int stage = 0;
        uint32_t phase = 0;
        float acc[128];
#pragma unroll
        for (int i = 0; i < 128; ++i) acc[i] = 0.f;

        for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
            int tm, tn;
            tile_coords(tile, tiles_m, tiles_n, tm, tn);
            int prev = -1;
            for (int kb = 0; kb < KB; ++kb) {
                mbar_wait(&full[stage], phase);
                const uint32_t a_base = smem_u32(smem + stage * STAGE_BYTES) + cons * 64 * 128;
                const uint32_t b_base = smem_u32(smem + stage * STAGE_BYTES) + A_BYTES;
                wgmma_fence();
#pragma unroll
                for (int k = 0; k < BK / 16; ++k) {
                    // A: K-major, 128-byte rows, 8-row groups 1024 B apart; k16 step = 32 bytes along the row
                    const uint64_t da = make_desc(a_base + k * 32, 16, 1024);
                    // B: MN-major (W is K x N row-major): 64-wide n-chunks 8 KB apart (LBO),
                    //    8-k groups 1024 B apart (SBO); k16 step = 16 rows of 128 bytes
                    const uint64_t db = make_desc(b_base + k * 2048, B_CHUNK, 1024);
                    wgmma_m64n256k16_bf16(acc, da, db, (kb | k) != 0);
                }
                wgmma_commit();
                wgmma_wait<1>();                          // the previous stage's wgmma's are done
                if (prev >= 0 && lane == 0) mbar_arrive(&empty[prev]);
                prev = stage;
                if (++stage == STAGES) { stage = 0; phase ^= 1; }
            }
            wgmma_wait<0>();
            if (prev >= 0 && lane == 0) mbar_arrive(&empty[prev]);

            // ---- fused epilogue: + bias, GELU, bf16 (the producer is already filling the ring) ----
            const int row0 = tm * BM + cons * 64 + warp * 16 + (lane >> 2);
            const int colq = tn * BN + (lane & 3) * 2;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
                const int col = colq + j * 8;
                if (col < N) {
                    const float2 b = __bfloat1622float2(__ldg(reinterpret_cast<const __nv_bfloat162*>(bias + col)));
                    if (row0 < M)
                        *reinterpret_cast<__nv_bfloat162*>(Y + (size_t)row0 * N + col) =
                            __floats2bfloat162_rn(gelu_erf(acc[4 * j + 0] + b.x), gelu_erf(acc[4 * j + 1] + b.y));
                    if (row0 + 8 < M)
                        *reinterpret_cast<__nv_bfloat162*>(Y + (size_t)(row0 + 8) * N + col) =
                            __floats2bfloat162_rn(gelu_erf(acc[4 * j + 2] + b.x), gelu_erf(acc[4 * j + 3] + b.y));
                }
            }
        }
    }
}

PFN_cuTensorMapEncodeTiled_v12000 get_encode_fn()
{
    static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
    if (!fn) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
    }
    return fn;
}

} // namespace

// Y[M][N] = gelu(X[M][K] * W[K][N] + b[N]); bf16 row-major in and out, fp32 accumulation.
// Needs K % 8 == 0 and N % 8 == 0 (16-byte TMA row pitch) and 16-byte aligned pointers.
extern "C" cudaError_t bf16_gemm_bias_gelu(const __nv_bfloat16* d_X, const __nv_bfloat16* d_W,
                                           const __nv_bfloat16* d_b, __nv_bfloat16* d_Y,
                                           int M, int N, int K, cudaStream_t stream)
{
    if (M <= 0 || N <= 0 || K <= 0) return cudaErrorInvalidValue;
    if (K % 8 || N % 8) return cudaErrorInvalidValue;
    PFN_cuTensorMapEncodeTiled_v12000 encode = get_encode_fn();
    if (!encode) return cudaErrorNotSupported;

    CUtensorMap tmX, tmW;
    {
        const cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)M};
        const cuuint64_t strides[1] = {(cuuint64_t)K * 2};
        const cuuint32_t box[2] = {BK, BM};
        const cuuint32_t es[2] = {1, 1};
        if (encode(&tmX, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<__nv_bfloat16*>(d_X), dims, strides, box, es,
                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
            return cudaErrorInvalidValue;
    }
    {
        const cuuint64_t dims[2] = {(cuuint64_t)N, (cuuint64_t)K};
        const cuuint64_t strides[1] = {(cuuint64_t)N * 2};
        const cuuint32_t box[2] = {64, BK};
        const cuuint32_t es[2] = {1, 1};
        if (encode(&tmW, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<__nv_bfloat16*>(d_W), dims, strides, box, es,
                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
            return cudaErrorInvalidValue;
    }

    cudaFuncSetAttribute(gemm_bias_gelu_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    int dev = 0, sms = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    const int ntiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    const int grid = std::max(1, std::min(ntiles, sms));          // persistent: one CTA per SM
    gemm_bias_gelu_kernel<<<grid, THREADS, SMEM_BYTES, stream>>>(tmX, tmW, d_b, d_Y, M, N, K);
    return cudaGetLastError();
}
