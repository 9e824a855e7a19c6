"""The loop-stride and shared-layout facts (tools/compiler/ptx/layout_loops.py) on what the real nvcc builds
from small kernels written for them: each form the definition counts and the near misses it must not count
(skipped without nvcc)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_ptx_flow import built

from cuda_llm.tools.compiler.ptx import flow_facts

# ------------------------------------------------------------------------------------------- grid_stride
GRID_STRIDE = r"""
__global__ void relu(const float* x, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""

GRID_STRIDE_64BIT_ONCE = r"""
__global__ void axpy(const float* x, float* y, float a, size_t n) {
    size_t stride = (size_t)blockDim.x * gridDim.x;          // computed once, 64-bit
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i < n; i += stride) y[i] += a * x[i];
}
"""

GRID_STRIDE_FLOAT4 = r"""
__global__ void scale4(const float4* __restrict__ x, float4* __restrict__ y, float s, int n4) {
    int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        y[i] = make_float4(v.x * s, v.y * s, v.z * s, v.w * s);
    }
}
"""

GRID_STRIDE_FIXED_BLOCK = r"""
template <unsigned BS>
__global__ void partial_sums(const float* x, float* out, unsigned n) {
    __shared__ float s[BS];
    unsigned i = blockIdx.x * BS * 2 + threadIdx.x;
    float acc = 0.f;
    while (i < n) {                 // two elements per step, the block size fixed at compile time
        acc += x[i];
        if (i + BS < n) acc += x[i + BS];
        i += BS * 2 * gridDim.x;
    }
    s[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x == 0) { float t = 0.f; for (unsigned k = 0; k < BS; ++k) t += s[k]; out[blockIdx.x] = t; }
}
template __global__ void partial_sums<256>(const float*, float*, unsigned);
"""

GRID_STRIDE_WARPS = r"""
__global__ void row_dots(const float* w, const float* x, float* y, int rows, int n) {
    int lane = threadIdx.x % 32;
    int warps = gridDim.x * blockDim.x / 32;                     // a warp per row, rows strided over the grid
    for (int r = (blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        float acc = 0.f;
        for (int j = lane; j < n; j += 32) acc += w[(size_t)r * n + j] * x[j];
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
        if (lane == 0) y[r] = acc;
    }
}
"""

GRID_STRIDE_COOPERATIVE_GROUPS = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void cg_sum(const float* x, float* out, unsigned long long n) {
    cg::grid_group grid = cg::this_grid();
    float acc = 0.f;
    for (unsigned long long i = grid.thread_rank(); i < n; i += grid.size()) acc += x[i];   // 3-D sizes multiplied
    atomicAdd(out, acc);
}
"""

PERSISTENT_TILES = r"""
#define TILE 256
__global__ void persistent_scale(const float* x, float* y, int tiles) {
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x)          // blocks loop over tiles
        for (int i = threadIdx.x; i < TILE; i += blockDim.x)
            y[tile * TILE + i] = 2.f * x[tile * TILE + i];
}
"""

PERSISTENT_ONE_PER_THREAD = r"""
__global__ void persistent_relu(const float* x, float* y, int tiles) {
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {     // a block-level loop: the tile counter
        int i = tile * blockDim.x + threadIdx.x;                          // steps by the grid alone
        y[i] = fmaxf(x[i], 0.f);
    }
}
"""

BLOCK_STRIDE = r"""
__global__ void row_sum(const float* x, float* out, int n) {
    float acc = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) acc += x[(size_t)blockIdx.x * n + i];   // a row per block
    atomicAdd(&out[blockIdx.x], acc);
}
"""

TILE_LOOP = r"""
#define TILE 16
__global__ void tiled(const float* A, const float* B, float* C, int n) {
    __shared__ float As[TILE][TILE], Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int t = 0; t < n; t += TILE) {
        As[threadIdx.y][threadIdx.x] = A[row * n + t + threadIdx.x];
        Bs[threadIdx.y][threadIdx.x] = B[(t + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    C[row * n + col] = acc;
}
"""

ROW_TILES_ALONG_Y = r"""
#define TILE 32
__global__ void column_sums(const float* a, float* out, int rows, int cols) {
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int r = blockIdx.y * TILE + threadIdx.y; r < rows; r += gridDim.y * TILE)   // tiles of rows per block
        acc += a[(size_t)r * cols + col];
    atomicAdd(&out[col], acc);
}
"""


@pytest.mark.parametrize("source, strided", [
    (GRID_STRIDE, True), (GRID_STRIDE_64BIT_ONCE, True), (GRID_STRIDE_FLOAT4, True), (GRID_STRIDE_FIXED_BLOCK, True),
    (GRID_STRIDE_WARPS, True), (GRID_STRIDE_COOPERATIVE_GROUPS, True), (PERSISTENT_TILES, False),
    (PERSISTENT_ONE_PER_THREAD, False), (BLOCK_STRIDE, False), (TILE_LOOP, False),
    (ROW_TILES_ALONG_Y, False),
], ids=["grid_stride", "stride_once_64bit", "float4_elements", "fixed_block_size", "warp_level", "grid_size_of_cooperative_groups",
        "persistent_tile_loop", "persistent_element_per_thread", "block_stride", "tile_loop", "row_tiles_along_y"])
def test_grid_stride(tmp_path: Path, source: str, strided: bool):
    _, sass = built(tmp_path, source)
    # (counted per loop: nvcc may unroll one and leave a remainder loop, two grid-stride loops)
    assert (sass.flow["grid_stride"] > 0) == strided, sass.flow


# --------------------------------------------------------------------------------------- shared_padding
TRANSPOSE = r"""
#define T 32
__global__ void transpose(const float* in, float* out, int n) {
    __shared__ float t[T][T + PAD];
    int x = blockIdx.x * T + threadIdx.x, y = blockIdx.y * T + threadIdx.y;
    t[threadIdx.y][threadIdx.x] = in[y * n + x];
    __syncthreads();
    x = blockIdx.y * T + threadIdx.x; y = blockIdx.x * T + threadIdx.y;
    out[y * n + x] = t[threadIdx.x][threadIdx.y];           // a warp walks a column
}
"""

LINEAR_ODD_PITCH = r"""
__global__ void transpose_linear(const float* in, float* out, int n) {
    __shared__ float t[32 * 33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    t[threadIdx.y * 33 + threadIdx.x] = in[y * n + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x; y = blockIdx.x * 32 + threadIdx.y;
    out[y * n + x] = t[threadIdx.x * 33 + threadIdx.y];
}
"""

FILTER_33_TAPS = r"""
__global__ void fir(const float* x, const float* taps, float* y, int n) {
    __shared__ float w[33];                                  // a 1-D array of odd length: no row pitch
    __shared__ float s[256 + 32];
    if (threadIdx.x < 33) w[threadIdx.x] = taps[threadIdx.x];
    int i = blockIdx.x * 256 + threadIdx.x;
    s[threadIdx.x] = x[i];
    if (threadIdx.x < 32) s[256 + threadIdx.x] = x[i + 256];
    __syncthreads();
    float acc = 0.f;
    for (int k = 0; k < 33; ++k) acc += w[k] * s[threadIdx.x + k];
    y[i] = acc;
}
"""

HALO_ONE_D_BLOCK = r"""
#define B 16
__global__ void blur(const float* in, float* out, int n) {
    __shared__ float t[B + 2][B + 2];          // a halo of one on each side: 18 = 16 + 2 is no padding
    int tx = threadIdx.x % B, ty = threadIdx.x / B;   // 256 threads: the lanes of a warp span two rows
    int x = blockIdx.x * B + tx, y = blockIdx.y * B + ty;
    t[ty + 1][tx + 1] = in[y * n + x];
    if (tx == 0) t[ty + 1][0] = in[y * n + max(x - 1, 0)];
    if (tx == B - 1) t[ty + 1][B + 1] = in[y * n + min(x + 1, n - 1)];
    if (ty == 0) t[0][tx + 1] = in[max(y - 1, 0) * n + x];
    if (ty == B - 1) t[B + 1][tx + 1] = in[min(y + 1, n - 1) * n + x];
    __syncthreads();
    out[y * n + x] = 0.2f * (t[ty + 1][tx + 1] + t[ty][tx + 1] + t[ty + 2][tx + 1] + t[ty + 1][tx] + t[ty + 1][tx + 2]);
}
"""


PER_THREAD_ROWS = r"""
__global__ void median3x3(const float* in, float* out, int w, int h) {
    __shared__ float win[256 * 9];                 // each thread's own 9 values: a private row, no padding
    int x = blockIdx.x * 16 + threadIdx.x % 16, y = blockIdx.y * 16 + threadIdx.x / 16;
    for (int k = 0; k < 9; ++k)
        win[threadIdx.x * 9 + k] = in[min(max(y + k / 3 - 1, 0), h - 1) * w + min(max(x + k % 3 - 1, 0), w - 1)];
    for (int i = 0; i < 5; ++i)
        for (int j = i + 1; j < 9; ++j) {
            float a = win[threadIdx.x * 9 + i], b = win[threadIdx.x * 9 + j];
            if (b < a) { win[threadIdx.x * 9 + i] = b; win[threadIdx.x * 9 + j] = a; }
        }
    out[y * w + x] = win[threadIdx.x * 9 + 4];
}
__global__ void best_of_33(const float* in, float* out) {
    __shared__ float best[128 * 33];               // 33 of the thread's own values, read back by it alone
    for (int k = 0; k < 33; ++k) best[threadIdx.x * 33 + k] = in[(blockIdx.x * 128 + threadIdx.x) * 33 + k];
    float m = 0.f;
    for (int k = 0; k < 33; ++k) m = fmaxf(m, best[threadIdx.x * 33 + (k + 5) % 33]);
    out[blockIdx.x * 128 + threadIdx.x] = m;
}
"""

WMMA_STRIDE = r"""
#include <mma.h>
using namespace nvcuda;
#define LD (16 + PAD)
__global__ void wmma_tile(const half* A, const half* B, float* C) {
    __shared__ __align__(32) half As[16 * LD], Bs[16 * LD];
    for (int i = threadIdx.x; i < 256; i += 32) { As[(i / 16) * LD + i % 16] = A[i]; Bs[(i / 16) * LD + i % 16] = B[i]; }
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::fill_fragment(c, 0.f);
    wmma::load_matrix_sync(a, As, LD);                      // the fragment's rows LD halves apart
    wmma::load_matrix_sync(b, Bs, LD);
    wmma::mma_sync(c, a, b, c);
    wmma::store_matrix_sync(C, c, 16, wmma::mem_row_major);
}
"""


@pytest.mark.parametrize("source, padded", [
    (TRANSPOSE.replace("PAD", "1"), True), (TRANSPOSE.replace("PAD", "4"), True), (LINEAR_ODD_PITCH, True),
    (WMMA_STRIDE.replace("PAD", "8"), True),
    (TRANSPOSE.replace("PAD", "0"), False), (FILTER_33_TAPS, False), (HALO_ONE_D_BLOCK, False),
    (WMMA_STRIDE.replace("PAD", "0"), False), (PER_THREAD_ROWS, False),
], ids=["pad_1", "pad_4", "linear_33", "wmma_stride_24_halves", "unpadded_32", "filter_33_taps", "stencil_halo",
        "wmma_stride_16_halves", "per_thread_rows"])
def test_shared_padding(tmp_path: Path, source: str, padded: bool):
    _, sass = built(tmp_path, source)
    assert (sass.flow["shared_padding"] > 0) == padded, sass.flow
    assert sass.flow["shared_swizzle"] == 0, sass.flow


# --------------------------------------------------------------------------------------- shared_swizzle
XOR_TRANSPOSE = r"""
__global__ void transpose_xor(const float* in, float* out, int n) {
    __shared__ float t[32][32];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    t[threadIdx.y][threadIdx.x ^ threadIdx.y] = in[y * n + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x; y = blockIdx.x * 32 + threadIdx.y;
    out[y * n + x] = t[threadIdx.x][threadIdx.y ^ threadIdx.x];
}
"""

XOR_ROW_BITS = r"""
__global__ void staged_rows(const float4* in, float* out, int k) {
    __shared__ float4 s[64 * 8];
    int row = threadIdx.x / 8, col = threadIdx.x % 8;
    for (int t = 0; t < k; ++t) {
        s[row * 8 + (col ^ (row & 7))] = in[(size_t)t * 512 + threadIdx.x];   // 16-byte chunks swizzled by row
        __syncthreads();
        float4 v = s[(threadIdx.x % 64) * 8 + ((threadIdx.x / 64) ^ ((threadIdx.x % 64) & 7))];
        out[(size_t)t * 512 + threadIdx.x] = v.x + v.y + v.z + v.w;
        __syncthreads();
    }
}
"""

BITONIC = r"""
__global__ void bitonic(float* data) {
    __shared__ float s[1024];
    unsigned tid = threadIdx.x;
    s[tid] = data[blockIdx.x * 1024 + tid];
    __syncthreads();
    for (unsigned k = 2; k <= 1024; k <<= 1)
        for (unsigned j = k >> 1; j > 0; j >>= 1) {
            unsigned ixj = tid ^ j;                                  // the partner element, not a layout
            if (ixj > tid) {
                float a = s[tid], b = s[ixj];
                if (((tid & k) == 0) == (a > b)) { s[tid] = b; s[ixj] = a; }
            }
            __syncthreads();
        }
    data[blockIdx.x * 1024 + tid] = s[tid];
}
"""

BITONIC_BIT_PARTNER = r"""
__global__ void bitonic_bits(float* data, int logn) {
    __shared__ float s[1024];
    unsigned tid = threadIdx.x;
    s[tid] = data[blockIdx.x * 1024 + tid];
    __syncthreads();
    for (int k = 1; k <= logn; ++k)
        for (int j = k - 1; j >= 0; --j) {
            unsigned ixj = tid ^ (1u << j);                          // one bit: the partner, not a layout
            if (ixj > tid) {
                float a = s[tid], b = s[ixj];
                if (((tid >> k) & 1) == (a > b)) { s[tid] = b; s[ixj] = a; }
            }
            __syncthreads();
        }
    data[blockIdx.x * 1024 + tid] = s[tid];
}
"""

PARTNER_AT_A_GIVEN_STRIDE = r"""
__global__ void merge_step(float* data, unsigned stride) {
    __shared__ float s[1024];
    unsigned tid = threadIdx.x;
    s[tid] = data[blockIdx.x * 1024 + tid];
    __syncthreads();
    unsigned p = tid ^ stride;                                       // the partner at a stride the host gives
    if (p > tid) { float a = s[tid], b = s[p]; if (a > b) { s[tid] = b; s[p] = a; } }
    __syncthreads();
    data[blockIdx.x * 1024 + tid] = s[tid];
}
"""

STAGE_FLIP = r"""
__global__ void two_stage(const float* in, float* out, int tiles) {
    __shared__ float s[2][256];
    int cur = 0;
    s[cur][threadIdx.x] = in[threadIdx.x];
    float acc = 0.f;
    for (int t = 0; t < tiles; ++t) {
        __syncthreads();
        if (t + 1 < tiles) s[cur ^ 1][threadIdx.x] = in[(t + 1) * 256 + threadIdx.x];
        acc += s[cur][255 - threadIdx.x];
        cur ^= 1;
    }
    out[blockIdx.x * 256 + threadIdx.x] = acc;
}
"""

HASHED_KEYS = r"""
__global__ void count_keys(const unsigned* keys, unsigned* counts, int n) {
    __shared__ unsigned table[1024];
    table[threadIdx.x] = 0;
    __syncthreads();
    unsigned key = keys[blockIdx.x * blockDim.x + threadIdx.x];
    atomicAdd(&table[(key ^ (key >> 10) ^ threadIdx.x) & 1023], 1u);     // a hash of a loaded key
    __syncthreads();
    counts[blockIdx.x * blockDim.x + threadIdx.x] = table[threadIdx.x];
}
"""


@pytest.mark.parametrize("source, swizzled", [
    (XOR_TRANSPOSE, True), (XOR_ROW_BITS, True), (BITONIC, False), (BITONIC_BIT_PARTNER, False),
    (PARTNER_AT_A_GIVEN_STRIDE, False), (STAGE_FLIP, False), (HASHED_KEYS, False),
], ids=["xor_transpose", "xor_row_bits", "bitonic_partner", "bitonic_bit_partner", "partner_at_a_given_stride",
        "stage_flip", "hashed_keys"])
def test_shared_swizzle(tmp_path: Path, source: str, swizzled: bool):
    _, sass = built(tmp_path, source)
    assert (sass.flow["shared_swizzle"] > 0) == swizzled, sass.flow
    assert sass.flow["shared_padding"] == 0, sass.flow


WGMMA_DESCRIPTORS = """
.version 8.8
.target sm_90a
.address_size 64
.extern .shared .align 128 .b8 smem[];
.visible .entry gemm(
	.param .u64 gemm_param_0
)
{
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<8>;
	.reg .f32 	%f<5>;
	mov.u32 	%r1, smem;
	cvt.u64.u32 	%rd1, %r1;
	shr.u64 	%rd2, %rd1, 4;
	and.b64 	%rd3, %rd2, 16383;
	or.b64  	%rd4, %rd3, DESCRIPTOR_BITS;
	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1, %f2, %f3, %f4}, %rd4, %rd4, 1, 1, 1, 0, 0;
	wgmma.commit_group.sync.aligned;
	ret;
}
"""


@pytest.mark.parametrize("bits, swizzled", [("4611686293305360384", True), ("-9223371761976868864", True),
                                            ("68720001024", False)], ids=["128B", "64B", "no_swizzle"])
def test_a_wgmma_descriptor_swizzle_mode_is_a_swizzle(bits: str, swizzled: bool):
    """Bits 62-63 of a wgmma shared-memory descriptor select a 128, 64 or 32-byte swizzle; 0 none."""
    assert (flow_facts(WGMMA_DESCRIPTORS.replace("DESCRIPTOR_BITS", bits))["shared_swizzle"] > 0) == swizzled
