// features: warp_per_row, warp_vote_match, vector_loads, coalesced_access, cache_hints, loop_unrolling, readonly_cache
// case: top-8 of each 1024-float row with one warp per row: each lane keeps a sorted top-8 of its 32 values (order-preserving uint keys) in registers, then 8 rounds of __reduce_max_sync / __reduce_min_sync merge the lanes' heads with ties to the lower index.
// Top-8 values (descending) and their column indices for each row of a rows x 1024 fp32 matrix.
// One warp per row: each lane keeps a sorted top-8 of its 32 values in registers, then the warp
// merges the 32 lists with 8 rounds of redux.sync max / min (ties go to the lower index).
#include <cuda_runtime.h>
#include <cstdint>

namespace {

constexpr int K = 8;
constexpr int COLS = 1024;
constexpr int PER_LANE = COLS / 32;        // 32 values
constexpr int VEC = PER_LANE / 4;          // 8 float4 per lane
constexpr int WARPS_PER_BLOCK = 8;

// order-preserving map float -> uint32 (larger float -> larger key)
__device__ __forceinline__ uint32_t fkey(float f) {
    const uint32_t b = __float_as_uint(f);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float kfloat(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

__global__ void __launch_bounds__(WARPS_PER_BLOCK * 32)
topk8_rows_kernel(const float* __restrict__ x, float* __restrict__ out_val, int* __restrict__ out_idx, int rows) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * WARPS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= rows) return;  // whole warp leaves together

    const float4* xr = reinterpret_cast<const float4*>(x + (size_t)row * COLS);
    float4 v[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[j] = __ldcs(xr + j * 32 + lane);  // 512 contiguous bytes per warp load

    // per-lane sorted list (descending keys); key 0 is below every real value
    uint32_t tk[K];
    int ti[K];
#pragma unroll
    for (int i = 0; i < K; ++i) { tk[i] = 0u; ti[i] = 0x7fffffff; }

#pragma unroll
    for (int j = 0; j < VEC; ++j) {
        const float e[4] = {v[j].x, v[j].y, v[j].z, v[j].w};
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const uint32_t key = fkey(e[c]);
            const int idx = (j * 32 + lane) * 4 + c;  // increasing per lane: strict '>' keeps the lower index on ties
            if (key > tk[K - 1]) {
                tk[K - 1] = key; ti[K - 1] = idx;
#pragma unroll
                for (int p = K - 1; p > 0; --p) {
                    if (tk[p] > tk[p - 1]) {
                        const uint32_t a = tk[p]; tk[p] = tk[p - 1]; tk[p - 1] = a;
                        const int b = ti[p]; ti[p] = ti[p - 1]; ti[p - 1] = b;
                    }
                }
            }
        }
    }

    // warp merge: each round the best head wins; its lane pops it
    float res_v = 0.f;
    int res_i = 0;
#pragma unroll
    for (int r = 0; r < K; ++r) {
        const uint32_t best = __reduce_max_sync(0xffffffffu, tk[0]);
        const uint32_t cand = (tk[0] == best) ? (uint32_t)ti[0] : 0xffffffffu;
        const uint32_t widx = __reduce_min_sync(0xffffffffu, cand);
        if (lane == r) { res_v = kfloat(best); res_i = (int)widx; }
        if (tk[0] == best && (uint32_t)ti[0] == widx) {
#pragma unroll
            for (int p = 0; p < K - 1; ++p) { tk[p] = tk[p + 1]; ti[p] = ti[p + 1]; }
            tk[K - 1] = 0u; ti[K - 1] = 0x7fffffff;
        }
    }
    if (lane < K) {
        out_val[(size_t)row * K + lane] = res_v;
        out_idx[(size_t)row * K + lane] = res_i;
    }
}

}  // namespace

// x: rows x 1024 row-major (16-byte aligned); out_val / out_idx: rows x 8.
extern "C" cudaError_t topk8_rows(const float* x, float* out_val, int* out_idx, int rows, int cols, cudaStream_t stream) {
    if (cols != COLS) return cudaErrorInvalidValue;
    if (rows <= 0) return cudaSuccess;
    const int grid = (rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
    topk8_rows_kernel<<<grid, WARPS_PER_BLOCK * 32, 0, stream>>>(x, out_val, out_idx, rows);
    return cudaGetLastError();
}
