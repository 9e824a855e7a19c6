// arch: sm_90a
// features: wgmma, cp_async, double_buffering, vector_loads, smem_tiling, bank_conflict_padding, kernel_fusion, coalesced_access, readonly_cache, loop_unrolling, fast_math_intrinsics, occupancy_tuning
// case: y = gelu(x W^T + b), fp16 in: 16-byte cp.async into an XOR-swizzled two-stage ring (wait_group 1), one warpgroup of
// wgmma m64n64k16 per 64 x 64 tile, the GELU epilogue on the accumulators.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cstdint>

constexpr int BM = 64, BN = 64, BK = 64;

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp16(void* dst, const void* src, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(smem_u32(dst)), "l"(src), "r"(ok ? 16 : 0));
}
// 128-byte rows of 8 chunks; chunk c of row r lives at chunk c ^ (r & 7): the 128B swizzle wgmma reads
__device__ __forceinline__ int swz(int r, int c) { return r * 64 + ((c ^ (r & 7)) << 3); }
__device__ __forceinline__ uint64_t desc(const void* p) {
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

__device__ __forceinline__ void load_stage(__half* sA, __half* sB, const __half* x, const __half* W, int M, int N, int K,
                                           int m0, int n0, int k0) {
    for (int i = threadIdx.x; i < BM * BK / 8; i += 128) {          // 8 chunks of 16 bytes per 64-half row
        const int r = i / 8, c = i % 8;
        const bool okA = m0 + r < M && k0 + c * 8 < K, okB = n0 + r < N && k0 + c * 8 < K;
        cp16(sA + swz(r, c), x + (size_t)min(m0 + r, M - 1) * K + min(k0 + c * 8, K - 8), okA);
        cp16(sB + swz(r, c), W + (size_t)min(n0 + r, N - 1) * K + min(k0 + c * 8, K - 8), okB);
    }
    asm volatile("cp.async.commit_group;");
}

__global__ void __launch_bounds__(128) linear_gelu(const __half* __restrict__ x, const __half* __restrict__ W,
                                                   const float* __restrict__ bias, float* __restrict__ y, int M, int N, int K) {
    __shared__ __align__(1024) __half sA[2][BM * BK];
    __shared__ __align__(1024) __half sB[2][BN * BK];
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, kt = (K + BK - 1) / BK;
    float d[32];
    #pragma unroll
    for (int i = 0; i < 32; ++i) d[i] = 0.f;
    load_stage(sA[0], sB[0], x, W, M, N, K, m0, n0, 0);
    for (int k = 0; k < kt; ++k) {
        const int cur = k & 1;
        if (k + 1 < kt) {
            load_stage(sA[cur ^ 1], sB[cur ^ 1], x, W, M, N, K, m0, n0, (k + 1) * BK);
            asm volatile("cp.async.wait_group 1;" ::: "memory");
        } else {
            asm volatile("cp.async.wait_group 0;" ::: "memory");
        }
        __syncthreads();
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        #pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) wgmma_64x64x16(d, desc(sA[cur] + kk * 16), desc(sB[cur] + kk * 16));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        __syncthreads();
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    #pragma unroll
    for (int i = 0; i < 16; ++i) {
        const int r = m0 + warp * 16 + lane / 4 + 8 * (i & 1), c = n0 + (i / 2) * 8 + 2 * (lane % 4);
        #pragma unroll
        for (int j = 0; j < 2; ++j) {
            if (r < M && c + j < N) {
                const float v = d[2 * i + j] + bias[c + j];
                const float u = 0.7978845608f * (v + 0.044715f * v * v * v);
                y[(size_t)r * N + c + j] = 0.5f * v * (1.f + (1.f - 2.f / (__expf(2.f * u) + 1.f)));
            }
        }
    }
}

extern "C" void solve(const __half* x, const __half* W, const float* bias, float* y, int M, int N, int K) {  // K % 8 == 0
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    linear_gelu<<<grid, 128>>>(x, W, bias, y, M, N, K);
}
