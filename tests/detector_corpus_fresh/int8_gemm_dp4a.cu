// features: wgmma, tma_bulk_copy, warp_specialization, double_buffering, persistent_kernel, block_rasterization, bank_conflict_padding, programmatic_dependent_launch, smem_tiling, coalesced_access, vector_loads, readonly_cache, stream_ordered_alloc, occupancy_tuning, launch_config_tuning, loop_unrolling
// arch: sm_90a
// case: int8 GEMM C(int32) = A(int8, MxK) * B(int8, KxN) at 4096^3 on Hopper integer tensor cores: a swizzled shared-memory transpose makes B K-major (s8 wgmma has no transpose), then a PDL-chained persistent warp-specialized kernel streams 128x128-byte A and 256x128-byte B tiles by TMA into a 4-stage mbarrier ring for two consumer warpgroups running m64n256k32 s8 wgmma in grouped tile order.
#include <cuda_runtime.h>
#include <cuda.h>
#include <stdint.h>

namespace {

// ---------------------------------------------------------------- B transpose (K x N -> N x K)
constexpr int kTT = 64;                         // 64 x 64 byte tile, 256 threads, 16 B each

// smem tile [k][64 bytes], 16-byte chunk index of column block XOR-ed with k / 16 so the
// column reads of the four k-quarters of a warp fall in different banks.
__global__ void __launch_bounds__(256)
transpose_b_s8(const int8_t* __restrict__ B, int8_t* __restrict__ Bt, int K, int N) {
    __shared__ __align__(16) uint32_t tile[kTT][kTT / 4];
    const int t = threadIdx.x;
    const int k0 = blockIdx.y * kTT, n0 = blockIdx.x * kTT;
    {
        const int k = t >> 2, ch = t & 3;                       // 4 threads per 64-byte row: coalesced
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (k0 + k < K && n0 + ch * 16 < N)
            v = __ldg(reinterpret_cast<const uint4*>(B + (size_t)(k0 + k) * N + n0 + ch * 16));
        *reinterpret_cast<uint4*>(&tile[k][4 * (ch ^ (k >> 4))]) = v;
    }
    __syncthreads();
    // All blocks of this grid are running: let the GEMM grid launch and run its prologue.
    cudaTriggerProgrammaticLaunchCompletion();
    {
        const int n = t >> 2, kq = t & 3;                       // out row n, k in [16kq, 16kq + 16)
        const int word = (n >> 2) ^ (kq << 2);                  // = 4 * ((n>>4) ^ kq) + ((n>>2) & 3)
        const int sh = (n & 3) * 8;
        uint32_t o[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            uint32_t r = 0;
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                const int k = kq * 16 + q * 4 + b;
                r |= ((tile[k][word] >> sh) & 0xffu) << (8 * b);
            }
            o[q] = r;
        }
        if (n0 + n < N && k0 + kq * 16 < K)
            *reinterpret_cast<uint4*>(Bt + (size_t)(n0 + n) * K + k0 + kq * 16) = make_uint4(o[0], o[1], o[2], o[3]);
    }
}

// ---------------------------------------------------------------- GEMM
constexpr int BM = 128;
constexpr int BN = 256;
constexpr int BK = 128;                         // bytes = int8 elements: one 128B swizzle row
constexpr int kStages = 4;
constexpr int kGroupM = 8;
constexpr int kConsumers = 2;
constexpr int kThreads = 128 * (kConsumers + 1);
constexpr int kABytes = BM * BK;                // 16 KB
constexpr int kBBytes = BN * BK;                // 32 KB
constexpr int kStageBytes = kABytes + kBBytes;
constexpr int kSmemBytes = kStages * kStageBytes + 1024 + 2 * kStages * 8;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }

// K-major, 128-byte swizzle: SBO = 8 rows * 128 B = 1024 B, LBO unused for swizzled K-major.
__device__ __forceinline__ uint64_t make_desc_kmajor_sw128(uint32_t saddr) {
    uint64_t d = 0;
    d |= (uint64_t)((saddr & 0x3FFFF) >> 4);
    d |= (uint64_t)1 << 16;
    d |= (uint64_t)(1024 >> 4) << 32;
    d |= 1ull << 62;
    return d;
}

// D(64x256, s32) (+)= A(64x32 s8, K-major) * B(32x256 s8, K-major)
__device__ __forceinline__ void wgmma_m64n256k32_s8(int (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
        "%128, %129, p;\n"
        "}\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
          "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]),
          "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]),
          "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]),
          "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]),
          "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]),
          "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]),
          "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]),
          "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]),
          "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]),
          "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]),
          "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]),
          "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]),
          "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]),
          "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]),
          "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d)
        : "memory");
}
__device__ __forceinline__ void tile_coords(int tile, int tiles_m, int tiles_n, int& tm, int& tn) {
    const int group_size = kGroupM * tiles_n;
    const int group = tile / group_size;
    const int first_m = group * kGroupM;
    const int rows = min(tiles_m - first_m, kGroupM);
    const int in_group = tile - group * group_size;
    tm = first_m + in_group % rows;
    tn = in_group / rows;
}

__global__ void __launch_bounds__(kThreads, 1)
igemm_wgmma_tma_kernel(const __grid_constant__ CUtensorMap tmap_a,    // A : M x K, K contiguous
                       const __grid_constant__ CUtensorMap tmap_bt,   // Bt: N x K, K contiguous
                       int32_t* __restrict__ C, int M, int N, int K) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    const uint32_t sA = smem_u32(smem);
    const uint32_t sB = sA + kStages * kABytes;
    const uint32_t full_bar = sB + kStages * kBBytes;
    const uint32_t empty_bar = full_bar + kStages * 8;

    const int wg = threadIdx.x / 128;
    const int tiles_m = (M + BM - 1) / BM;
    const int tiles_n = (N + BN - 1) / BN;
    const int num_tiles = tiles_m * tiles_n;
    const int ktiles = (K + BK - 1) / BK;

    // Prologue overlapped with the transpose kernel's tail (PDL).
    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) {
            mbar_init(full_bar + 8 * s, 1);
            mbar_init(empty_bar + 8 * s, kConsumers * 128);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (threadIdx.x == 0) {
            asm volatile("prefetch.tensormap [%0];" :: "l"(reinterpret_cast<uint64_t>(&tmap_a)) : "memory");
            asm volatile("prefetch.tensormap [%0];" :: "l"(reinterpret_cast<uint64_t>(&tmap_bt)) : "memory");
            cudaGridDependencySynchronize();               // Bt written by the transpose grid
            int stage = 0;
            uint32_t phase = 0;
            for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
                int tm, tn;
                tile_coords(tile, tiles_m, tiles_n, tm, tn);
                for (int kt = 0; kt < ktiles; ++kt) {
                    mbar_wait(empty_bar + 8 * stage, phase ^ 1);
                    const uint32_t fb = full_bar + 8 * stage;
                    mbar_expect_tx(fb, kStageBytes);
                    tma_load_2d(sA + stage * kABytes, &tmap_a, kt * BK, tm * BM, fb);
                    tma_load_2d(sB + stage * kBBytes, &tmap_bt, kt * BK, tn * BN, fb);
                    if (++stage == kStages) { stage = 0; phase ^= 1; }
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        const int c = wg - 1;
        const int t = threadIdx.x & 127;
        const int warp = t >> 5, lane = t & 31;
        int d[128];
#pragma unroll
        for (int i = 0; i < 128; ++i) d[i] = 0;

        int stage = 0;
        uint32_t phase = 0;
        for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
            int tm, tn;
            tile_coords(tile, tiles_m, tiles_n, tm, tn);
            int prev = -1;
            for (int kt = 0; kt < ktiles; ++kt) {
                mbar_wait(full_bar + 8 * stage, phase);
                const uint32_t a_base = sA + stage * kABytes + c * (64 * BK);
                const uint32_t b_base = sB + stage * kBBytes;
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BK / 32; ++kk)       // k32 = 32 bytes inside the swizzled row
                    wgmma_m64n256k32_s8(d, make_desc_kmajor_sw128(a_base + kk * 32),
                                        make_desc_kmajor_sw128(b_base + kk * 32), (kt > 0 || kk > 0) ? 1 : 0);
                wgmma_commit();
                wgmma_wait<1>();
                if (prev >= 0) mbar_arrive(empty_bar + 8 * prev);
                prev = stage;
                if (++stage == kStages) { stage = 0; phase ^= 1; }
            }
            wgmma_wait<0>();
            if (prev >= 0) mbar_arrive(empty_bar + 8 * prev);

            const int r0 = tm * BM + c * 64 + warp * 16 + (lane >> 2);
            const int col0 = tn * BN + 2 * (lane & 3);
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
                const int col = col0 + 8 * j;
                if (col < N) {
                    if (r0 < M)
                        *reinterpret_cast<int2*>(C + (size_t)r0 * N + col) = make_int2(d[4 * j + 0], d[4 * j + 1]);
                    if (r0 + 8 < M)
                        *reinterpret_cast<int2*>(C + (size_t)(r0 + 8) * N + col) = make_int2(d[4 * j + 2], d[4 * j + 3]);
                }
            }
        }
    }
}

// ---------------------------------------------------------------- host
typedef CUresult (*EncodeTiledFn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                  const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiledFn get_encode() {
    static EncodeTiledFn fn = nullptr;
    if (!fn) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = reinterpret_cast<EncodeTiledFn>(p);
    }
    return fn;
}

bool make_map_s8(CUtensorMap* map, const void* base, uint64_t inner, uint64_t outer, uint32_t box_inner,
                 uint32_t box_outer) {
    EncodeTiledFn enc = get_encode();
    if (!enc) return false;
    cuuint64_t dims[2] = {inner, outer};
    cuuint64_t strides[1] = {inner};
    cuuint32_t box[2] = {box_inner, box_outer};
    cuuint32_t estr[2] = {1, 1};
    return enc(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims, strides, box, estr,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

int8_t* g_bt = nullptr;          // transposed B, kept across calls
size_t g_bt_bytes = 0;

}  // namespace

// C (M x N, int32) = A (M x K, int8) * B (K x N, int8), row-major; K % 16 == 0, N % 16 == 0,
// 16-byte aligned A and B. Not safe for concurrent calls (shared scratch).
extern "C" cudaError_t int8_gemm_dp4a(const int8_t* A, const int8_t* B, int32_t* C, int M, int N, int K,
                                      cudaStream_t stream) {
    if (M <= 0 || N <= 0) return cudaSuccess;
    if (K <= 0) return cudaMemsetAsync(C, 0, (size_t)M * N * sizeof(int32_t), stream);
    if ((K & 15) || (N & 15) ||
        ((reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B) | reinterpret_cast<uintptr_t>(C)) & 15))
        return cudaErrorInvalidValue;

    const size_t bt_bytes = (size_t)N * K;
    if (bt_bytes > g_bt_bytes) {
        if (g_bt) cudaFree(g_bt);
        cudaError_t e = cudaMalloc(&g_bt, bt_bytes);
        if (e != cudaSuccess) { g_bt = nullptr; g_bt_bytes = 0; return e; }
        g_bt_bytes = bt_bytes;
    }
    CUtensorMap ta, tb;
    if (!make_map_s8(&ta, A, (uint64_t)K, (uint64_t)M, BK, BM)) return cudaErrorInvalidValue;
    if (!make_map_s8(&tb, g_bt, (uint64_t)K, (uint64_t)N, BK, BN)) return cudaErrorInvalidValue;

    static int num_sms = 0;
    static bool attr_set = false;
    if (!num_sms) {
        int dev;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, dev);
    }
    if (!attr_set) {
        cudaError_t e = cudaFuncSetAttribute(igemm_wgmma_tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        if (e != cudaSuccess) return e;
        attr_set = true;
    }

    dim3 tgrid((N + kTT - 1) / kTT, (K + kTT - 1) / kTT);
    transpose_b_s8<<<tgrid, 256, 0, stream>>>(B, g_bt, K, N);

    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(tiles < num_sms ? tiles : num_sms);   // persistent: one CTA per SM
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = kSmemBytes;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, igemm_wgmma_tma_kernel, ta, tb, C, M, N, K);
}
