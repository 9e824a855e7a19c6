// features: warp_per_row, warp_shuffle, vector_loads, coalesced_access, readonly_cache, cache_hints, loop_unrolling
// case: CSR (1M x 1M, 16M nnz) times a dense 1M x 64 matrix: one warp per sparse row, lanes load 32 (col, val) pairs at once and broadcast them by shuffle while each lane gathers a float2 of every referenced dense row (256 B coalesced per warp), four nonzeros in flight.
#include <cuda_runtime.h>
#include <stdint.h>

constexpr int NCOLS = 64;                  // dense width: 32 lanes x float2
constexpr int WARPS_PER_BLOCK = 8;

__global__ void __launch_bounds__(WARPS_PER_BLOCK * 32)
spmm_csr_warp_row(const int* __restrict__ row_ptr, const int* __restrict__ col_idx,
                  const float* __restrict__ vals, const float* __restrict__ B,
                  float* __restrict__ C, int nrows)
{
    const int row = blockIdx.x * WARPS_PER_BLOCK + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= nrows) return;                       // whole warp leaves together
    const int beg = __ldg(row_ptr + row), end = __ldg(row_ptr + row + 1);
    const float2* __restrict__ B2 = reinterpret_cast<const float2*>(B);

    float2 acc0 = make_float2(0.f, 0.f), acc1 = acc0;
    for (int base = beg; base < end; base += 32) {
        const int n = min(32, end - base);
        int my_c = 0; float my_v = 0.f;
        if (lane < n) {                              // coalesced load of up to 32 nonzeros
            my_c = __ldcs(col_idx + base + lane);
            my_v = __ldcs(vals + base + lane);
        }
        int j = 0;
        for (; j + 4 <= n; j += 4) {
            int c[4]; float v[4]; float2 b[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                c[u] = __shfl_sync(0xffffffffu, my_c, j + u);
                v[u] = __shfl_sync(0xffffffffu, my_v, j + u);
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) b[u] = __ldg(B2 + (size_t)c[u] * (NCOLS / 2) + lane);
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                float2& a = (u & 1) ? acc1 : acc0;
                a.x = fmaf(v[u], b[u].x, a.x);
                a.y = fmaf(v[u], b[u].y, a.y);
            }
        }
        for (; j < n; ++j) {
            const int c = __shfl_sync(0xffffffffu, my_c, j);
            const float v = __shfl_sync(0xffffffffu, my_v, j);
            const float2 b = __ldg(B2 + (size_t)c * (NCOLS / 2) + lane);
            acc0.x = fmaf(v, b.x, acc0.x);
            acc0.y = fmaf(v, b.y, acc0.y);
        }
    }
    __stcs(reinterpret_cast<float2*>(C + (size_t)row * NCOLS) + lane,
           make_float2(acc0.x + acc1.x, acc0.y + acc1.y));
}

// A (CSR): row_ptr[nrows+1], col_idx[nnz], vals[nnz]; B: [ncols_A][64] row-major; C: [nrows][64].
extern "C" void spmm_csr(const int* row_ptr, const int* col_idx, const float* vals,
                         const float* B, float* C, int nrows, cudaStream_t stream)
{
    const int blocks = (nrows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
    spmm_csr_warp_row<<<blocks, WARPS_PER_BLOCK * 32, 0, stream>>>(row_ptr, col_idx, vals, B, C, nrows);
}
