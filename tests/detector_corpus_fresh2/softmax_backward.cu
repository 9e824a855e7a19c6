// features: single_pass_row, kernel_fusion, block_reduction_tree, warp_shuffle, vector_loads, coalesced_access, readonly_cache, cache_hints, loop_unrolling
// case: Softmax backward dx = y * (dy - sum(dy*y)) for 16384 rows of 4096: one 256-thread block per row holds its 16 y and dy values per thread in registers (float4 loads, streamed), reduces the dot product with shuffles plus a 32-slot shared stage, and writes dx from the held copy (one read, one write per element); a generic two-pass kernel covers other widths.
#include <cuda_runtime.h>
#include <stdint.h>

constexpr int THREADS = 256;
constexpr int NWARPS = THREADS / 32;

__device__ __forceinline__ float block_sum(float v, float* red) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < NWARPS ? red[lane] : 0.f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffffu, w, o);
        if (lane == 0) red[32] = w;
    }
    __syncthreads();
    return red[32];
}

// row held in registers: VEC float4 of y and of dy per thread
template <int VEC>
__global__ void __launch_bounds__(THREADS)
softmax_bwd_regs(const float* __restrict__ y, const float* __restrict__ dy, float* __restrict__ dx)
{
    constexpr int COLS4 = VEC * THREADS;
    __shared__ float red[33];
    const size_t base = (size_t)blockIdx.x * COLS4;
    const float4* __restrict__ y4 = reinterpret_cast<const float4*>(y) + base;
    const float4* __restrict__ d4 = reinterpret_cast<const float4*>(dy) + base;
    float4 yv[VEC], dv[VEC];
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        yv[i] = __ldcs(y4 + threadIdx.x + i * THREADS);
        dv[i] = __ldcs(d4 + threadIdx.x + i * THREADS);
    }
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < VEC; ++i)
        s += yv[i].x * dv[i].x + yv[i].y * dv[i].y + yv[i].z * dv[i].z + yv[i].w * dv[i].w;
    const float dot = block_sum(s, red);
    float4* __restrict__ o4 = reinterpret_cast<float4*>(dx) + base;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        float4 r;
        r.x = yv[i].x * (dv[i].x - dot);
        r.y = yv[i].y * (dv[i].y - dot);
        r.z = yv[i].z * (dv[i].z - dot);
        r.w = yv[i].w * (dv[i].w - dot);
        __stcs(o4 + threadIdx.x + i * THREADS, r);
    }
}

// generic fallback: any width, two passes over the row
__global__ void __launch_bounds__(THREADS)
softmax_bwd_generic(const float* __restrict__ y, const float* __restrict__ dy, float* __restrict__ dx, int cols)
{
    __shared__ float red[33];
    const size_t base = (size_t)blockIdx.x * cols;
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += THREADS) s += __ldg(y + base + c) * __ldg(dy + base + c);
    const float dot = block_sum(s, red);
    for (int c = threadIdx.x; c < cols; c += THREADS)
        dx[base + c] = __ldg(y + base + c) * (__ldg(dy + base + c) - dot);
}

extern "C" void softmax_backward(const float* y, const float* dy, float* dx, int rows, int cols,
                                 cudaStream_t stream)
{
    if (cols == 4096)
        softmax_bwd_regs<4><<<rows, THREADS, 0, stream>>>(y, dy, dx);
    else if (cols == 2048)
        softmax_bwd_regs<2><<<rows, THREADS, 0, stream>>>(y, dy, dx);
    else if (cols == 8192)
        softmax_bwd_regs<8><<<rows, THREADS, 0, stream>>>(y, dy, dx);
    else
        softmax_bwd_generic<<<rows, THREADS, 0, stream>>>(y, dy, dx, cols);
}
