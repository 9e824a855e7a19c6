// arch: sm_90a
// features: wgmma, tma_bulk_copy, warp_specialization, double_buffering, persistent_kernel, smem_tiling, bank_conflict_padding, block_rasterization, loop_unrolling, occupancy_tuning, launch_config_tuning
// case: batched hgemm on Hopper: a producer warp issues TMA loads into a 4-stage ring (full/empty mbarriers),
// a consumer warpgroup runs wgmma m64n64k16 from 128B-swizzled tiles; persistent CTAs walk a grouped tile order.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda.h>
#include <cstdint>

constexpr int BM = 64, BN = 64, BK = 64, STAGES = 4, GROUP_M = 8;

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint64_t* b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_u32(b)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_u32(b)), "r"(bytes));
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem_u32(b)));
}
__device__ __forceinline__ void mbar_wait(uint64_t* b, int phase) {
    asm volatile("{\n.reg .pred P1;\nWAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n@!P1 bra WAIT;\n}\n"
                 :: "r"(smem_u32(b)), "r"(phase));
}
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];"
                 :: "r"(smem_u32(dst)), "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
__device__ __forceinline__ uint64_t desc(const void* p) {      // K-major, 128-byte swizzle
    uint64_t a = smem_u32(p);
    return ((a & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}

#define D32 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"
__device__ __forceinline__ void wgmma_64x64x16(float* d, uint64_t da, uint64_t db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " D32 ", %32, %33, 1, 1, 1, 0, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db));
}

__global__ void __launch_bounds__(256, 1) hgemm_ws(const __grid_constant__ CUtensorMap mapA,
                                                   const __grid_constant__ CUtensorMap mapB,
                                                   float* __restrict__ C, int M, int N, int K, int batch) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __half* sA = reinterpret_cast<__half*>(smem);                       // STAGES x BM x BK
    __half* sB = sA + STAGES * BM * BK;                                 // STAGES x BN x BK (B stored N x K)
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    const int tm = (M + BM - 1) / BM, tn = (N + BN - 1) / BN, per_batch = tm * tn, tiles = per_batch * batch;
    const int kt = (K + BK - 1) / BK;
    const int wg = threadIdx.x / 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) { mbar_init(&full[s], 1); mbar_init(&empty[s], 128); }
        asm volatile("fence.mbarrier_init.release.cluster;");
    }
    __syncthreads();
    if (wg == 0) {                                                     // producer warpgroup: one thread issues TMA
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (threadIdx.x == 0) {
            int it = 0;
            for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
                const int b = tile / per_batch, t = tile % per_batch;
                const int group = t / (GROUP_M * tn), first_m = group * GROUP_M, gm = min(tm - first_m, GROUP_M);
                const int m = first_m + (t % (GROUP_M * tn)) % gm, n = (t % (GROUP_M * tn)) / gm;
                for (int k = 0; k < kt; ++k, ++it) {
                    const int s = it % STAGES, phase = (it / STAGES) & 1;
                    if (it >= STAGES) mbar_wait(&empty[s], phase ^ 1);
                    mbar_expect_tx(&full[s], (BM + BN) * BK * sizeof(__half));
                    tma_load_3d(sA + s * BM * BK, &mapA, &full[s], k * BK, m * BM, b);
                    tma_load_3d(sB + s * BN * BK, &mapB, &full[s], k * BK, n * BN, b);
                }
            }
        }
    } else {                                                           // consumer warpgroup: wgmma
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        int it = 0;
        const int lt = threadIdx.x - 128, warp = lt / 32, lane = lt % 32;
        for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            const int b = tile / per_batch, t = tile % per_batch;
            const int group = t / (GROUP_M * tn), first_m = group * GROUP_M, gm = min(tm - first_m, GROUP_M);
            const int m = first_m + (t % (GROUP_M * tn)) % gm, n = (t % (GROUP_M * tn)) / gm;
            float d[32];
            #pragma unroll
            for (int i = 0; i < 32; ++i) d[i] = 0.f;
            for (int k = 0; k < kt; ++k, ++it) {
                const int s = it % STAGES, phase = (it / STAGES) & 1;
                mbar_wait(&full[s], phase);
                asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
                #pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk)
                    wgmma_64x64x16(d, desc(sA + s * BM * BK + kk * 16), desc(sB + s * BN * BK + kk * 16));
                asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
                asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
                mbar_arrive(&empty[s]);
            }
            float* Cb = C + (size_t)b * M * N;
            #pragma unroll
            for (int i = 0; i < 16; ++i) {               // accumulator layout of m64nNk16: rows warp*16 + lane/4 (+8)
                const int r = m * BM + warp * 16 + lane / 4 + 8 * (i & 1);
                const int c = n * BN + (i / 2) * 8 + 2 * (lane % 4);
                if (r < M && c < N) Cb[(size_t)r * N + c] = d[2 * i];
                if (r < M && c + 1 < N) Cb[(size_t)r * N + c + 1] = d[2 * i + 1];
            }
        }
    }
}

typedef CUresult (*EncodeFn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                             const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                             CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static CUtensorMap make_map(EncodeFn enc, const void* p, int inner, int outer, int batch, int box_outer) {
    CUtensorMap m;
    cuuint64_t dims[3] = {(cuuint64_t)inner, (cuuint64_t)outer, (cuuint64_t)batch};
    cuuint64_t strides[2] = {(cuuint64_t)inner * 2, (cuuint64_t)inner * outer * 2};
    cuuint32_t box[3] = {BK, (cuuint32_t)box_outer, 1}, el[3] = {1, 1, 1};
    enc(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, const_cast<void*>(p), dims, strides, box, el,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return m;
}

// A: batch x M x K, Bt: batch x N x K (B transposed, K-major), both half; K a multiple of 8.
extern "C" void solve(const __half* A, const __half* Bt, float* C, int batch, int M, int N, int K) {
    static EncodeFn enc = nullptr;
    static int sms = 0;
    if (!enc) {
        cudaDriverEntryPointQueryResult q;
        cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&enc), cudaEnableDefault, &q);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    }
    CUtensorMap mA = make_map(enc, A, K, M, batch, BM), mB = make_map(enc, Bt, K, N, batch, BN);
    const int smem = STAGES * (BM + BN) * BK * sizeof(__half);
    cudaFuncSetAttribute(hgemm_ws, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN) * batch;
    hgemm_ws<<<tiles < sms ? tiles : sms, 256, smem>>>(mA, mB, C, M, N, K, batch);
}
