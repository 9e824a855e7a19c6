// features: warp_per_row, warp_shuffle, register_blocking, vector_loads, coalesced_access, readonly_cache, cache_hints, reduced_precision, loop_unrolling, occupancy_tuning
// case: y = A x with A bf16 (16384 x 16384) and x, y fp32: each warp streams two rows of A with 16-byte L1-bypassing loads (4 in flight per row per lane), widens bf16 to fp32 with bit shifts, dots against x read through the read-only cache, and reduces each row with xor-shuffles.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRows = 2;      // rows per warp: every x load feeds two rows
constexpr int kUnroll = 4;    // 16-byte chunks per row per lane in flight

// A is streamed once: read-only path, do not allocate in L1 (keeps x resident there).
__device__ __forceinline__ uint4 ld_stream(const void* p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}

// Two bf16 in one 32-bit word -> two fp32 (exact: bf16 is the top half of an fp32).
__device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ float dot8(uint4 a, float4 x0, float4 x1, float acc) {
    acc = fmaf(bf_lo(a.x), x0.x, acc); acc = fmaf(bf_hi(a.x), x0.y, acc);
    acc = fmaf(bf_lo(a.y), x0.z, acc); acc = fmaf(bf_hi(a.y), x0.w, acc);
    acc = fmaf(bf_lo(a.z), x1.x, acc); acc = fmaf(bf_hi(a.z), x1.y, acc);
    acc = fmaf(bf_lo(a.w), x1.z, acc); acc = fmaf(bf_hi(a.w), x1.w, acc);
    return acc;
}

// Vector path: N % 8 == 0, A and x 16-byte aligned.
__global__ void __launch_bounds__(kThreads, 4)
gemv_bf16_vec(const __nv_bfloat16* __restrict__ A, const float* __restrict__ x,
              float* __restrict__ y, int M, int N) {
    const int lane = threadIdx.x & 31;
    const int row0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * kRows;
    if (row0 >= M) return;
    const int n8 = N >> 3;                                  // 16-byte chunks per row
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);

    const uint4* rowp[kRows];
    bool valid[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        valid[r] = (row0 + r) < M;
        rowp[r] = reinterpret_cast<const uint4*>(A + (size_t)(valid[r] ? row0 + r : row0) * N);
    }

    float acc[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] = 0.f;

    int c = lane;
    for (; c + 32 * (kUnroll - 1) < n8; c += 32 * kUnroll) {
        uint4 a[kRows][kUnroll];
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) a[r][u] = ld_stream(rowp[r] + c + 32 * u);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int cc = c + 32 * u;
            const float4 x0 = __ldg(x4 + 2 * cc);            // x: 64 KB, stays in L1 / L2
            const float4 x1 = __ldg(x4 + 2 * cc + 1);
#pragma unroll
            for (int r = 0; r < kRows; ++r) acc[r] = dot8(a[r][u], x0, x1, acc[r]);
        }
    }
    for (; c < n8; c += 32) {
        const float4 x0 = __ldg(x4 + 2 * c);
        const float4 x1 = __ldg(x4 + 2 * c + 1);
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r] = dot8(ld_stream(rowp[r] + c), x0, x1, acc[r]);
    }

#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        float v = acc[r];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0 && valid[r]) y[row0 + r] = v;
    }
}

// Generic path (any N / alignment): one warp per row, scalar loads.
__global__ void __launch_bounds__(kThreads)
gemv_bf16_generic(const __nv_bfloat16* __restrict__ A, const float* __restrict__ x,
                  float* __restrict__ y, int M, int N) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * kWarps + (threadIdx.x >> 5);
    if (row >= M) return;
    const __nv_bfloat16* __restrict__ a = A + (size_t)row * N;
    float acc = 0.f;
    for (int c = lane; c < N; c += 32) acc = fmaf(__bfloat162float(a[c]), __ldg(x + c), acc);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) y[row] = acc;
}

}  // namespace

extern "C" cudaError_t gemv_bf16(const __nv_bfloat16* A, const float* x, float* y, int M, int N,
                                 cudaStream_t stream) {
    if (M <= 0) return cudaSuccess;
    const bool aligned = ((reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(x)) & 15) == 0;
    if (aligned && (N & 7) == 0) {
        const int rows_per_block = kWarps * kRows;
        gemv_bf16_vec<<<(M + rows_per_block - 1) / rows_per_block, kThreads, 0, stream>>>(A, x, y, M, N);
    } else {
        gemv_bf16_generic<<<(M + kWarps - 1) / kWarps, kThreads, 0, stream>>>(A, x, y, M, N);
    }
    return cudaGetLastError();
}
