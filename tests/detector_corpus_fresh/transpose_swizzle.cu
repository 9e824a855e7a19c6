// features: smem_tiling, bank_conflict_padding, coalesced_access, vector_loads, readonly_cache, cache_hints, loop_unrolling, occupancy_tuning
// case: Out-of-place transpose of a 16384 x 8192 fp32 matrix: each 256-thread block moves a 64x64 tile as four 32x32 shared subtiles with an XOR-swizzled column (col ^ row), so float4 global reads and float4 global writes (4 full 128-byte rows per warp instruction) meet conflict-free scalar shared accesses; a padded [32][33] scalar kernel covers shapes that are not multiples of 4.
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int kTile = 64;
constexpr int kThreads = 256;

// in: rows x cols (row-major), out: cols x rows. rows % 4 == 0, cols % 4 == 0, 16-byte aligned.
__global__ void __launch_bounds__(kThreads, 8)
transpose_swizzle_vec(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[4][32][32];                  // 4 subtiles (a, b) = (sub >> 1, sub & 1)

    const int tiles_c = (cols + kTile - 1) / kTile;
    const int tr = blockIdx.x / tiles_c, tc = blockIdx.x - tr * tiles_c;
    const int r0 = tr * kTile, c0 = tc * kTile;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int lrow = lane >> 3;                        // 4 rows per warp instruction
    const int lc4 = lane & 7;                          // 8 float4 = one 128-byte row segment
    const bool full = (r0 + kTile <= rows) && (c0 + kTile <= cols);

    // Load: unit u covers 4 rows x 32 columns of subtile u >> 3.
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int u = k * 8 + warp;
        const int sub = u >> 3;
        const int r = (u & 7) * 4 + lrow;              // row inside the subtile
        const int grow = r0 + 32 * (sub >> 1) + r;
        const int gcol = c0 + 32 * (sub & 1) + 4 * lc4;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (full || (grow < rows && gcol < cols))
            v = __ldcs(reinterpret_cast<const float4*>(in + (size_t)grow * cols + gcol));
        // element (r, c) lives at column c ^ r: bank = 4 * (lc4 ^ r/4) + (j ^ r%4), 32 distinct per warp
        tile[sub][r][(4 * lc4 + 0) ^ r] = v.x;
        tile[sub][r][(4 * lc4 + 1) ^ r] = v.y;
        tile[sub][r][(4 * lc4 + 2) ^ r] = v.z;
        tile[sub][r][(4 * lc4 + 3) ^ r] = v.w;
    }
    __syncthreads();

    // Store: output row = input column c, four consecutive input rows form one float4.
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int u = k * 8 + warp;
        const int sub = u >> 3;
        const int c = (u & 7) * 4 + lrow;              // column inside the subtile = output row
        const int rr = 4 * lc4;                        // first of 4 input rows = output columns
        float4 v;
        v.x = tile[sub][rr + 0][c ^ (rr + 0)];
        v.y = tile[sub][rr + 1][c ^ (rr + 1)];
        v.z = tile[sub][rr + 2][c ^ (rr + 2)];
        v.w = tile[sub][rr + 3][c ^ (rr + 3)];
        const int orow = c0 + 32 * (sub & 1) + c;
        const int ocol = r0 + 32 * (sub >> 1) + rr;
        if (full || (orow < cols && ocol < rows))
            __stcs(reinterpret_cast<float4*>(out + (size_t)orow * rows + ocol), v);
    }
}

// Any shape: classic 32 x 32 tile with a padded inner dimension, scalar accesses.
__global__ void __launch_bounds__(256)
transpose_padded_scalar(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[32][33];
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;   // 32 x 8
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
        const int r = r0 + ty + j, c = c0 + tx;
        if (r < rows && c < cols) tile[ty + j][tx] = __ldcs(in + (size_t)r * cols + c);
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
        const int orow = c0 + ty + j, ocol = r0 + tx;
        if (orow < cols && ocol < rows) __stcs(out + (size_t)orow * rows + ocol, tile[tx][ty + j]);
    }
}

}  // namespace

// out (cols x rows) = transpose(in (rows x cols)), fp32, out-of-place.
extern "C" cudaError_t transpose_swizzle(const float* in, float* out, int rows, int cols, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    const bool vec = ((rows & 3) == 0) && ((cols & 3) == 0) &&
                     (((reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(out)) & 15) == 0);
    if (vec) {
        const long long tiles = (long long)((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
        if (tiles <= 0x7fffffffLL) {
            transpose_swizzle_vec<<<(unsigned)tiles, kThreads, 0, stream>>>(in, out, rows, cols);
            return cudaGetLastError();
        }
    }
    dim3 grid((cols + 31) / 32, (rows + 31) / 32);
    if (grid.y > 65535) return cudaErrorInvalidValue;
    transpose_padded_scalar<<<grid, 256, 0, stream>>>(in, out, rows, cols);
    return cudaGetLastError();
}
