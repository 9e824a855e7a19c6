// features: tma_bulk_copy, double_buffering, persistent_kernel, smem_tiling, register_blocking, loop_unrolling, vector_loads, cache_hints, readonly_cache, coalesced_access, launch_config_tuning, occupancy_tuning
// case: depthwise 5x5 convolution, NCHW fp32 (32 x 256 x 112 x 112, padding 2): persistent blocks walk 112 x 56 output tiles, one thread issues a 3-D TMA copy of the 116 x 60 haloed input tile (out-of-bounds rows and columns zero-filled by the TMA unit, so padding costs nothing) into a two-stage mbarrier ring while the previous tile computes, and each thread produces a 4 x 7 output block from float4 shared reads with the 25 weights in registers.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#include <stdint.h>
#include <algorithm>

namespace {

constexpr int KS = 5, PAD = 2;
constexpr int TW = 112;                 // output tile width
constexpr int TH = 56;                  // output tile height
constexpr int RY = 7;                   // output rows per thread
constexpr int TX = TW / 4;              // 28 threads across (4 outputs each)
constexpr int TY = TH / RY;             // 8 threads down
constexpr int THREADS = TX * TY;        // 224
constexpr int IW = TW + KS - 1;         // 116 input columns per tile
constexpr int IH = TH + KS - 1;         // 60 input rows per tile
constexpr int TILE_BYTES  = IW * IH * 4;                          // 27840, what the TMA delivers
constexpr int STAGE_BYTES = (TILE_BYTES + 127) / 128 * 128;       // 27904, 128-byte aligned stages
constexpr int STAGES = 2;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 128;            // + alignment slack

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
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
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar, int x, int y, int z)
{
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n"
        :: "r"(smem_u32(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(x), "r"(y), "r"(z)
        : "memory");
}

__global__ void __launch_bounds__(THREADS, 2)
dwconv5x5_tma_kernel(const __grid_constant__ CUtensorMap tmap_in,   // dims {W, H, N*C}
                     const float* __restrict__ weight,             // [C][5][5]
                     float* __restrict__ out,                      // [N][C][H][W]
                     int C, int H, int W, int tiles_x, int tiles_y, int ntiles)
{
    extern __shared__ uint8_t smem_raw[];
    float* smem = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(smem_raw) + 127) & ~uintptr_t(127));
    __shared__ __align__(8) uint64_t full[STAGES];

    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;

    if (tid == 0) {
        asm volatile("prefetch.tensormap [%0];\n" :: "l"(reinterpret_cast<uint64_t>(&tmap_in)) : "memory");
        for (int s = 0; s < STAGES; ++s) mbar_init(&full[s], 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    __syncthreads();

    auto issue = [&](int tile, int stage) {
        const int per_plane = tiles_x * tiles_y;
        const int plane = tile / per_plane;
        const int r = tile - plane * per_plane;
        const int by = r / tiles_x, bx = r - by * tiles_x;
        float* dst = smem + stage * (STAGE_BYTES / 4);
        mbar_arrive_expect_tx(&full[stage], TILE_BYTES);
        // start at (-2, -2) relative to the output tile: the halo outside the image is zero-filled
        tma_load_3d(dst, &tmap_in, &full[stage], bx * TW - PAD, by * TH - PAD, plane);
    };

    int tile = blockIdx.x;
    if (tid == 0 && tile < ntiles) issue(tile, 0);

    for (int it = 0; tile < ntiles; ++it, tile += gridDim.x) {
        const int stage = it & 1;
        const int next = tile + gridDim.x;
        // the other stage was last read in iteration it-1, which ended with __syncthreads()
        if (tid == 0 && next < ntiles) issue(next, stage ^ 1);

        const int per_plane = tiles_x * tiles_y;
        const int plane = tile / per_plane;
        const int r = tile - plane * per_plane;
        const int by = r / tiles_x, bx = r - by * tiles_x;
        const int c = plane % C;

        float w[KS * KS];
#pragma unroll
        for (int k = 0; k < KS * KS; ++k) w[k] = __ldg(weight + c * KS * KS + k);

        mbar_wait(&full[stage], (it >> 1) & 1);
        const float* s = smem + stage * (STAGE_BYTES / 4);

        float acc[RY][4];
#pragma unroll
        for (int i = 0; i < RY; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;

        // input rows ty*RY .. ty*RY + RY + 3, columns 4*tx .. 4*tx + 7 (two aligned float4)
#pragma unroll
        for (int ir = 0; ir < RY + KS - 1; ++ir) {
            const float* rowp = s + (ty * RY + ir) * IW + tx * 4;
            const float4 lo = *reinterpret_cast<const float4*>(rowp);
            const float4 hi = *reinterpret_cast<const float4*>(rowp + 4);
            const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
            for (int ky = 0; ky < KS; ++ky) {
                const int orow = ir - ky;                 // output row fed by this input row and tap row
                if (orow < 0 || orow >= RY) continue;     // resolved at compile time
#pragma unroll
                for (int kx = 0; kx < KS; ++kx)
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        acc[orow][j] = fmaf(w[ky * KS + kx], v[j + kx], acc[orow][j]);
            }
        }

        const int ox = bx * TW + tx * 4;
        const int oy0 = by * TH + ty * RY;
        float* op = out + (size_t)plane * H * W;
        if (ox < W) {
#pragma unroll
            for (int i = 0; i < RY; ++i) {
                const int oy = oy0 + i;
                if (oy < H)        // output is written once and not re-read here: streaming store
                    __stcs(reinterpret_cast<float4*>(op + (size_t)oy * W + ox),
                           make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
            }
        }
        __syncthreads();           // everyone is done with this stage before it is refilled
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

// out = depthwise_conv(in, weight), 5x5 taps, stride 1, zero padding 2; NCHW fp32, weight [C][5][5].
// Needs W % 4 == 0 (16-byte row pitch for the tensor map) and a 16-byte aligned output.
extern "C" cudaError_t depthwise_conv2d_5x5(const float* d_in, const float* d_w, float* d_out,
                                           int N, int C, int H, int W, cudaStream_t stream)
{
    if (N <= 0 || C <= 0 || H <= 0 || W <= 0) return cudaSuccess;
    if (W % 4 != 0 || (reinterpret_cast<uintptr_t>(d_in) & 15) || (reinterpret_cast<uintptr_t>(d_out) & 15))
        return cudaErrorInvalidValue;
    PFN_cuTensorMapEncodeTiled_v12000 encode = get_encode_fn();
    if (!encode) return cudaErrorNotSupported;

    CUtensorMap tmap;
    const cuuint64_t dims[3]    = {(cuuint64_t)W, (cuuint64_t)H, (cuuint64_t)N * C};
    const cuuint64_t strides[2] = {(cuuint64_t)W * 4, (cuuint64_t)H * W * 4};
    const cuuint32_t box[3]     = {IW, IH, 1};
    const cuuint32_t estr[3]    = {1, 1, 1};
    CUresult cr = encode(&tmap, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, const_cast<float*>(d_in), dims, strides,
                         box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (cr != CUDA_SUCCESS) return cudaErrorInvalidValue;

    const int tiles_x = (W + TW - 1) / TW, tiles_y = (H + TH - 1) / TH;
    const long long nt = (long long)N * C * tiles_x * tiles_y;
    if (nt > INT32_MAX) return cudaErrorInvalidValue;
    const int ntiles = (int)nt;

    cudaFuncSetAttribute(dwconv5x5_tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    int dev = 0, sms = 0, per_sm = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, dwconv5x5_tma_kernel, THREADS, SMEM_BYTES);
    const int grid = std::max(1, std::min(ntiles, sms * std::max(per_sm, 1)));
    dwconv5x5_tma_kernel<<<grid, THREADS, SMEM_BYTES, stream>>>(tmap, d_w, d_out, C, H, W, tiles_x, tiles_y, ntiles);
    return cudaGetLastError();
}
