// features: online_softmax, warp_per_row, warp_shuffle, vector_loads, coalesced_access, readonly_cache, cache_hints, fast_math_intrinsics, loop_unrolling, occupancy_tuning
// case: One-pass log-sum-exp of each row of a 16384 x 4096 fp32 matrix: one warp per row streams the row in float4 chunks of 16 values per lane, keeps an online (max, sum of exp2) pair rescaled once per chunk, and merges the lanes' pairs with xor-shuffles.
#include <cuda_runtime.h>
#include <stdint.h>
#include <math.h>

namespace {

constexpr int kThreads = 256;            // 8 warps, 8 rows per block
constexpr int kUnroll = 4;               // float4 loads in flight per lane
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Merge two (max, sum) pairs; sums are in the base-2 domain scaled by 2^-max.
__device__ __forceinline__ void lse_merge(float& m, float& s, float om, float os) {
    const float mn = fmaxf(m, om);
    if (mn == -INFINITY) return;                       // both partials empty
    if (mn == INFINITY) { m = mn; s = 1.f; return; }   // +inf dominates
    s = s * exp2f(m - mn) + os * exp2f(om - mn);
    m = mn;
}

// Inputs pre-scaled by log2(e), so every exponential is a single ex2.approx.
__device__ __forceinline__ void lse_chunk(float& m, float& s, const float4* v, int cnt) {
    float cm = -INFINITY;
#pragma unroll
    for (int i = 0; i < kUnroll; ++i)
        if (i < cnt) cm = fmaxf(cm, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
    const float mn = fmaxf(m, cm);
    if (mn == -INFINITY) return;                       // chunk and state all -inf
    if (mn == INFINITY) { m = mn; s = 1.f; return; }   // +inf dominates
    float acc = s * exp2f(m - mn);                     // one rescale per 16 values
#pragma unroll
    for (int i = 0; i < kUnroll; ++i) {
        if (i < cnt) {
            acc += exp2f(v[i].x - mn) + exp2f(v[i].y - mn);
            acc += exp2f(v[i].z - mn) + exp2f(v[i].w - mn);
        }
    }
    m = mn;
    s = acc;
}

__global__ void __launch_bounds__(kThreads, 4)
logsumexp_rows_kernel(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (kThreads / 32) + (threadIdx.x >> 5);
    if (row >= rows) return;                           // whole warp exits together
    const float* __restrict__ xr = x + (size_t)row * cols;

    float m = -INFINITY, s = 0.f;
    const bool vec_ok = ((reinterpret_cast<uintptr_t>(xr) & 15) == 0);
    int done = 0;
    if (vec_ok) {
        const int c4 = cols >> 2;
        const float4* __restrict__ x4 = reinterpret_cast<const float4*>(xr);
        // Full chunks: 32 lanes x kUnroll float4 = 512 floats per step, 512 B per load instruction.
        int base = 0;
        for (; base + 32 * kUnroll <= c4; base += 32 * kUnroll) {
            float4 v[kUnroll];
#pragma unroll
            for (int i = 0; i < kUnroll; ++i) {
                float4 t = __ldcs(x4 + base + i * 32 + lane);
                v[i] = make_float4(t.x * kLog2e, t.y * kLog2e, t.z * kLog2e, t.w * kLog2e);
            }
            lse_chunk(m, s, v, kUnroll);
        }
        // Remaining float4s (fewer than a full chunk).
        for (; base < c4; base += 32) {
            const int idx = base + lane;
            if (idx < c4) {
                float4 t = __ldcs(x4 + idx);
                float4 v[kUnroll];
                v[0] = make_float4(t.x * kLog2e, t.y * kLog2e, t.z * kLog2e, t.w * kLog2e);
                lse_chunk(m, s, v, 1);
            }
        }
        done = c4 << 2;
    }
    // Scalar tail (cols % 4, or unaligned rows).
    for (int c = done + lane; c < cols; c += 32) {
        const float v = __ldcs(xr + c) * kLog2e;
        lse_merge(m, s, v, 1.f);
    }
    // Merge the 32 lanes' pairs.
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float om = __shfl_xor_sync(0xffffffffu, m, o);
        const float os = __shfl_xor_sync(0xffffffffu, s, o);
        lse_merge(m, s, om, os);
    }
    if (lane == 0) {
        // ln(sum e^x) = ln2 * (m2 + log2(s2)), with m2 = max * log2(e)
        out[row] = (m == -INFINITY) ? -INFINITY : kLn2 * (m + __log2f(s));
    }
}

}  // namespace

extern "C" cudaError_t logsumexp_rows(const float* x, float* out, int rows, int cols,
                                      cudaStream_t stream) {
    if (rows <= 0) return cudaSuccess;
    const int rows_per_block = kThreads / 32;
    const int grid = (rows + rows_per_block - 1) / rows_per_block;
    logsumexp_rows_kernel<<<grid, kThreads, 0, stream>>>(x, out, rows, cols);
    return cudaGetLastError();
}
