// features: single_pass_row, kernel_fusion, online_softmax, warp_shuffle, block_reduction_tree, vector_loads, coalesced_access, cache_hints, fast_math_intrinsics, loop_unrolling, readonly_cache, occupancy_tuning
// case: row softmax of 16384 x 4096 fp32 with one 256-thread block per row holding the row in registers as float4 (max and sum by warp shuffles plus a per-warp shared array, exp2f with a pre-scaled argument), and an online-softmax block kernel as fallback for long rows.
// softmax over each row of a row-major fp32 matrix (rows x cols), tuned for 16384 x 4096.
#include <cuda_runtime.h>
#include <math_constants.h>
#include <cstdint>

namespace {

constexpr int THREADS = 256;
constexpr int WARPS = THREADS / 32;

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Block-wide all-reduce: shuffles inside each warp, 8 per-warp partials through shared memory.
template <bool IS_MAX>
__device__ __forceinline__ float block_allreduce(float v, float* red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = IS_MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float r = (lane < WARPS) ? red[lane] : (IS_MAX ? -CUDART_INF_F : 0.f);
    r = IS_MAX ? warp_max(r) : warp_sum(r);
    __syncthreads();  // red[] may be reused by the next reduction
    return r;
}

// Fast path: the whole row lives in registers (VEC float4 per thread), one DRAM read and one write per element.
template <int VEC>
__global__ void __launch_bounds__(THREADS, 2)
softmax_row_regs(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float red[WARPS];
    const size_t row = blockIdx.x;
    const float4* xr = reinterpret_cast<const float4*>(x + row * cols);
    float4* yr = reinterpret_cast<float4*>(y + row * cols);
    const int nvec = cols >> 2;

    float4 v[VEC];
    float m = -CUDART_INF_F;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        const int c = threadIdx.x + i * THREADS;
        if (c < nvec) v[i] = __ldcs(xr + c);
        else v[i] = make_float4(-CUDART_INF_F, -CUDART_INF_F, -CUDART_INF_F, -CUDART_INF_F);
        m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
    }
    m = block_allreduce<true>(m, red);

    const float LOG2E = 1.4426950408889634f;
    const float mb = m * LOG2E;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        v[i].x = exp2f(fmaf(v[i].x, LOG2E, -mb));
        v[i].y = exp2f(fmaf(v[i].y, LOG2E, -mb));
        v[i].z = exp2f(fmaf(v[i].z, LOG2E, -mb));
        v[i].w = exp2f(fmaf(v[i].w, LOG2E, -mb));
        s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
    s = block_allreduce<false>(s, red);
    const float inv = __fdividef(1.f, s);
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        const int c = threadIdx.x + i * THREADS;
        if (c < nvec) {
            float4 o = make_float4(v[i].x * inv, v[i].y * inv, v[i].z * inv, v[i].w * inv);
            __stcs(yr + c, o);
        }
    }
}

// Fallback for long or unaligned rows: online (max, sum) in one pass, then one output pass.
__global__ void __launch_bounds__(THREADS)
softmax_row_online(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float sm_m[WARPS], sm_s[WARPS];
    const size_t row = blockIdx.x;
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float m = -CUDART_INF_F, s = 0.f;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        const float v = __ldg(xr + c);
        const float mn = fmaxf(m, v);
        s = s * __expf(m - mn) + __expf(v - mn);
        m = mn;
    }
    // merge (m, s) pairs across the warp
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float mo = __shfl_xor_sync(0xffffffffu, m, o);
        const float so = __shfl_xor_sync(0xffffffffu, s, o);
        const float mn = fmaxf(m, mo);
        s = (mn == -CUDART_INF_F) ? 0.f : s * __expf(m - mn) + so * __expf(mo - mn);
        m = mn;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sm_m[warp] = m; sm_s[warp] = s; }
    __syncthreads();
    m = lane < WARPS ? sm_m[lane] : -CUDART_INF_F;
    s = lane < WARPS ? sm_s[lane] : 0.f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float mo = __shfl_xor_sync(0xffffffffu, m, o);
        const float so = __shfl_xor_sync(0xffffffffu, s, o);
        const float mn = fmaxf(m, mo);
        s = (mn == -CUDART_INF_F) ? 0.f : s * __expf(m - mn) + so * __expf(mo - mn);
        m = mn;
    }
    const float inv = __fdividef(1.f, s);
    for (int c = threadIdx.x; c < cols; c += THREADS)
        __stcs(yr + c, __expf(__ldg(xr + c) - m) * inv);
}

}  // namespace

extern "C" cudaError_t softmax_rows(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    const bool aligned = (cols % 4 == 0) && (reinterpret_cast<uintptr_t>(x) % 16 == 0) &&
                         (reinterpret_cast<uintptr_t>(y) % 16 == 0);
    const int nvec = cols / 4;
    if (aligned && nvec <= THREADS * 1)       softmax_row_regs<1><<<rows, THREADS, 0, stream>>>(x, y, cols);
    else if (aligned && nvec <= THREADS * 2)  softmax_row_regs<2><<<rows, THREADS, 0, stream>>>(x, y, cols);
    else if (aligned && nvec <= THREADS * 4)  softmax_row_regs<4><<<rows, THREADS, 0, stream>>>(x, y, cols);   // 4096 cols
    else if (aligned && nvec <= THREADS * 8)  softmax_row_regs<8><<<rows, THREADS, 0, stream>>>(x, y, cols);
    else                                      softmax_row_online<<<rows, THREADS, 0, stream>>>(x, y, cols);
    return cudaGetLastError();
}
