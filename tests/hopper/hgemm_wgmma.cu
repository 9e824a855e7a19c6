// hgemm on Hopper's own instructions, written for the tests: an honest tensor-core candidate that must
// pass, be timed and not be suspect. Built for sm_90a (wgmma.mma_async assembles only there).
//
// Both operands reach shared memory through TMA (cp.async.bulk.tensor.2d, 128-byte swizzle, completion
// counted in bytes on an mbarrier) and one warpgroup multiplies them with wgmma.mma_async m64n128k16
// (fp16 in, fp32 accumulate). The operand layout is the one of the public "fast.cu" H100 worklog's
// TMA + wgmma kernel: both matrices K-major, 64-element (128-byte) rows, 128B-swizzled tiles, matrix
// descriptors with a 1024-byte stride between 8-row groups, and the k16 steps inside a tile taken by
// advancing the start address 32 bytes. Since B arrives row-major (N contiguous), solve() first makes a
// K-major copy of it (and of A), zero padded to whole tiles, so that odd sizes need no bounds in the
// main loop and every TMA stride is a multiple of 16 bytes.
#include <cuda_runtime.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_fp16.h>
#include <cstdint>

constexpr int BM = 64, BN = 128, BK = 64;

// ------------------------------------------------------------------------------------ K-major copies
__global__ void pad_a(const __half* __restrict__ A, __half* __restrict__ Ap, int M, int K, int Mp, int Kp) {
    const size_t total = (size_t)Mp * Kp;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int m = (int)(i / Kp), k = (int)(i % Kp);
        Ap[i] = (m < M && k < K) ? A[(size_t)m * K + k] : __float2half(0.0f);
    }
}

// Bt[n][k] = B[k][n] for n < Np, k < Kp (zero outside B), through a padded 32x32 shared tile.
__global__ void transpose_b(const __half* __restrict__ B, __half* __restrict__ Bt, int K, int N, int Kp) {
    __shared__ __half tile[32][33];
    const int n0 = blockIdx.x * 32, k0 = blockIdx.y * 32;
    for (int j = threadIdx.y; j < 32; j += blockDim.y) {
        const int k = k0 + j, n = n0 + threadIdx.x;
        tile[j][threadIdx.x] = (k < K && n < N) ? B[(size_t)k * N + n] : __float2half(0.0f);
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += blockDim.y) {
        const int n = n0 + j, k = k0 + threadIdx.x;
        Bt[(size_t)n * Kp + k] = tile[threadIdx.x][j];
    }
}

// ------------------------------------------------------------------------------------ main kernel
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Shared-memory matrix descriptor: start address, leading offset 16 B (unused with swizzle), stride
// 1024 B between 8-row groups, 128-byte swizzle (bits 62-63 = 1).
__device__ __forceinline__ uint64_t desc128(const void* p) {
    const uint64_t a = smem_u32(p);
    return ((a & 0x3FFFF) >> 4) | (uint64_t(16 >> 4) << 16) | (uint64_t(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t da, uint64_t db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done = 0;
    while (!done) {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    }
}

// One warpgroup (128 threads) computes a 64 x 128 tile of C; Kp is a multiple of BK.
__global__ void __launch_bounds__(128) hgemm_wgmma(const __grid_constant__ CUtensorMap map_a,
                                                   const __grid_constant__ CUtensorMap map_b,
                                                   float* __restrict__ C, int M, int N, int Kp) {
    __shared__ alignas(1024) __half sA[BM * BK];    // 128B swizzle needs 1024-byte alignment
    __shared__ alignas(1024) __half sB[BN * BK];
    __shared__ alignas(8) uint64_t bar;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const uint32_t bar_addr = smem_u32(&bar);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar_addr) : "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // the init, visible to the TMA unit
    }
    __syncthreads();

    float d[64];
#pragma unroll
    for (int j = 0; j < 64; ++j) d[j] = 0.0f;

    uint32_t parity = 0;
    for (int k0 = 0; k0 < Kp; k0 += BK) {
        if (threadIdx.x == 0) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                         :: "r"(bar_addr), "r"((BM + BN) * BK * (int)sizeof(__half)) : "memory");
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                         "[%0], [%1, {%2, %3}], [%4];"
                         :: "r"(smem_u32(sA)), "l"(&map_a), "r"(k0), "r"(m0), "r"(bar_addr) : "memory");
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                         "[%0], [%1, {%2, %3}], [%4];"
                         :: "r"(smem_u32(sB)), "l"(&map_b), "r"(k0), "r"(n0), "r"(bar_addr) : "memory");
        }
        mbar_wait(bar_addr, parity);   // the phase completes when both tiles' bytes have landed
        parity ^= 1;                   // the barrier is reused: the next phase has the other parity

        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) wgmma_m64n128k16(d, desc128(sA + kk * 16), desc128(sB + kk * 16));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        __syncthreads();               // every warp is done reading sA/sB before thread 0 refills them
    }

    // Accumulator layout of wgmma (fp32): warp w owns rows 16w..16w+15; register 8g+r of lane l holds
    // row 16w + l/4 (+8 for r = 2, 3, 6, 7), column 16g + 2(l%4) + (r&1) (+8 for r >= 4).
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row = m0 + warp * 16 + lane / 4;
#pragma unroll
    for (int g = 0; g < BN / 16; ++g) {
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            const int i = row + ((r >> 1) & 1) * 8;
            const int j = n0 + 16 * g + 2 * (lane % 4) + (r & 1) + (r >> 2) * 8;
            if (i < M && j < N) C[(size_t)i * N + j] = d[8 * g + r];
        }
    }
}

// ------------------------------------------------------------------------------------ host side
static PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
    static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
    if (encode == nullptr) {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) == cudaSuccess &&
            found == cudaDriverEntryPointSuccess) {
            encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
        }
    }
    return encode;
}

// rows x Kp fp16, K contiguous; boxes of BK x box_rows with the 128-byte swizzle.
static bool make_map(CUtensorMap* map, const __half* base, int rows, int Kp, int box_rows) {
    PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    if (encode == nullptr) return false;
    cuuint64_t dims[2] = {(cuuint64_t)Kp, (cuuint64_t)rows};
    cuuint64_t strides[1] = {(cuuint64_t)Kp * sizeof(__half)};
    cuuint32_t box[2] = {(cuuint32_t)BK, (cuuint32_t)box_rows};
    cuuint32_t elem[2] = {1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<__half*>(base), dims, strides, box, elem,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Scratch for the K-major copies, grown when a larger problem comes (never shrunk).
static __half* scratch(size_t elems) {
    static __half* buf = nullptr;
    static size_t have = 0;
    if (elems > have) {
        if (buf != nullptr) cudaFree(buf);
        buf = nullptr;
        have = 0;
        if (cudaMalloc(&buf, elems * sizeof(__half)) != cudaSuccess) return nullptr;
        have = elems;
    }
    return buf;
}

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

extern "C" void solve(const __half* A, const __half* B, float* C, int M, int N, int K) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        cudaMemsetAsync(C, 0, sizeof(float) * (size_t)M * N);
        return;
    }
    const int Mp = round_up(M, BM), Np = round_up(N, BN), Kp = round_up(K, BK);
    __half* Ap = scratch((size_t)(Mp + Np) * Kp);
    if (Ap == nullptr) return;
    __half* Bt = Ap + (size_t)Mp * Kp;
    const size_t a_elems = (size_t)Mp * Kp;
    const int pad_blocks = (int)((a_elems + 255) / 256 < 65535 ? (a_elems + 255) / 256 : 65535);
    pad_a<<<pad_blocks, 256>>>(A, Ap, M, K, Mp, Kp);
    transpose_b<<<dim3(Np / 32, Kp / 32), dim3(32, 8)>>>(B, Bt, K, N, Kp);
    CUtensorMap map_a, map_b;
    if (!make_map(&map_a, Ap, Mp, Kp, BM) || !make_map(&map_b, Bt, Np, Kp, BN)) return;
    hgemm_wgmma<<<dim3(Np / BN, Mp / BM), 128>>>(map_a, map_b, C, M, N, Kp);
}
