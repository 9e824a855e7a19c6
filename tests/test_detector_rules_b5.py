"""Rules written from the definitions in docs/features.md after a reading of the whole tuning data (batches 1-4):
each with a small kernel written for it that the detector must find and a near miss it must not, labelled from
the definitions before the detector ran. Kernels checked with their build are compiled with nvcc (skipped
without it)."""

from __future__ import annotations

from test_detector_rules import built, found


# ---------------------------------------------------------------------------------------- reduced_precision
# a reduction templated on its element type, half handled in a branch the float build never takes
TEMPLATE_BRANCH = """
#include <cuda_fp16.h>
#include <type_traits>
template <typename T>
__device__ T zero() {
    if constexpr (std::is_same_v<T, half2>) { return make_half2(0.0f, 0.0f); }
    else { return T(0); }
}
template <typename T>
__global__ void sum_rows(const T* x, T* out, int n) {
    T s = zero<T>();
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[blockIdx.x * n + i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
template __global__ void sum_rows<float>(const float*, float*, int);
"""

HALF_SCALE = """
#include <cuda_fp16.h>
__global__ void scale_half(const half* x, half* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half(a * __half2float(x[i]));
}
"""


def test_half_named_only_in_a_branch_the_build_never_takes_is_not_reduced_precision(tmp_path):
    assert found("reduced_precision", TEMPLATE_BRANCH)          # the source alone: the half2 branch counts
    kernels, sass = built(tmp_path, TEMPLATE_BRANCH)
    assert not found("reduced_precision", TEMPLATE_BRANCH, (kernels, sass))
    kernels, sass = built(tmp_path, HALF_SCALE)
    assert found("reduced_precision", HALF_SCALE, (kernels, sass))


# ---------------------------------------------------------------------------------------------- vector_loads
# scalar global loads staged in shared memory, read back through a 128-bit cast of the shared address
SHARED_VECTOR_CAST = """
__global__ void stage_rows(const float* x, float* y, int n) {
    __shared__ __align__(16) float tile[256];
    tile[threadIdx.x] = x[blockIdx.x * 256 + threadIdx.x];
    __syncthreads();
    if (threadIdx.x < 64) {
        float4 v = ((float4 *)(tile))[threadIdx.x];
        y[blockIdx.x * 64 + threadIdx.x] = v.x + v.y + v.z + v.w;
    }
}
"""

GLOBAL_VECTOR_CAST = """
__global__ void sum4(const float* x, float* y, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = ((const float4 *)(x))[i];
        y[i] = v.x + v.y + v.z + v.w;
    }
}
"""


def test_a_vector_cast_of_a_shared_address_is_no_vector_load_where_the_build_shows_none(tmp_path):
    assert found("vector_loads", SHARED_VECTOR_CAST)            # the source alone cannot tell the space
    kernels, sass = built(tmp_path, SHARED_VECTOR_CAST)
    assert not found("vector_loads", SHARED_VECTOR_CAST, (kernels, sass))
    kernels, sass = built(tmp_path, GLOBAL_VECTOR_CAST)
    assert found("vector_loads", GLOBAL_VECTOR_CAST, (kernels, sass))


# ------------------------------------------------------------------ privatized_atomics, bank_conflict_padding
# one column of a shared histogram per thread, counted without atomics; the merge reads each thread's row from
# a rotated column so the lanes' rows do not fall in one bank, and adds to the global histogram atomically
PER_THREAD_COLUMNS = """
__device__ void count(unsigned int h[64][32], unsigned char v) {
    int row = v >> 2;
    unsigned int c = h[row][threadIdx.x];
    c += 1u << 8 * (v & 3);
    h[row][threadIdx.x] = c;
}
__global__ void histogram_columns(unsigned int* out, const unsigned char* in, int n) {
    __shared__ unsigned int h[64][32];
    for (int r = 0; r < 64; ++r) h[r][threadIdx.x] = 0;
    __syncthreads();
    for (int i = blockIdx.x * 32 + threadIdx.x; i < n; i += 32 * gridDim.x) count(h, in[i]);
    __syncthreads();
    unsigned int s = 0;
    for (int i = 0; i < 32; ++i) {
        int col = (i + threadIdx.x) & 31;
        s += h[threadIdx.x][col] + h[threadIdx.x + 32][col];
    }
    atomicAdd(&out[threadIdx.x], s);
}
"""


def test_per_thread_shared_columns_counted_without_atomics_are_privatized():
    assert found("privatized_atomics", PER_THREAD_COLUMNS)
    # near miss: each thread's column accumulates products (a column of partial sums), not counts
    products = PER_THREAD_COLUMNS.replace("c += 1u << 8 * (v & 3);", "c += v * w[row];").replace(
        "unsigned char v) {", "unsigned char v, const unsigned int* w) {").replace(
        "count(h, in[i])", "count(h, in[i], (const unsigned int*)in)")
    assert products != PER_THREAD_COLUMNS and not found("privatized_atomics", products)


def test_a_rotated_column_of_the_threads_own_row_is_a_conflict_free_layout():
    assert found("bank_conflict_padding", PER_THREAD_COLUMNS)
    # near miss: a 1-D row read round from the thread's position (every lane already on its own bank)
    ring = """
__global__ void ring(const float* src, float* out) {
    __shared__ float sh[2][256];
    sh[0][threadIdx.x] = src[threadIdx.x];
    __syncthreads();
    float acc = 0.f;
    for (int k = 0; k < 256; k += 32) acc += sh[0][(threadIdx.x + k) % 256];
    out[threadIdx.x] = acc;
}
"""
    assert not found("bank_conflict_padding", ring)


# ---------------------------------------------------------------------------------------- bank_conflict_padding
# a tile in extern shared memory reached through a pointer, its rows 64 + PAD apart (PAD a template argument)
PADDED_STRIDE = """
template <int D, int PAD>
__global__ void rows_through_pointer(const float* x, float* y) {
    extern __shared__ float smem[];
    float* tile = smem;
    int r = threadIdx.x / 8, c = threadIdx.x % 8;
    tile[r * (D + PAD) + c] = x[blockIdx.x * 256 + threadIdx.x];
    __syncthreads();
    y[blockIdx.x * 256 + threadIdx.x] = tile[c * (D + PAD) + r];
}
template __global__ void rows_through_pointer<64, 8>(const float*, float*);
"""


def test_a_padded_row_stride_in_a_shared_pointers_address_is_padding():
    assert found("bank_conflict_padding", PADDED_STRIDE)
    # near misses: the padding instantiated as 0; the same stride in a global address only
    assert not found("bank_conflict_padding", PADDED_STRIDE.replace("<64, 8>", "<64, 0>"))
    global_only = """
__global__ void strided_rows(const float* x, float* y) {
    __shared__ float s[256];
    s[threadIdx.x] = x[blockIdx.x * 132 + threadIdx.x];
    __syncthreads();
    y[blockIdx.x * 256 + threadIdx.x] = s[255 - threadIdx.x];
}
"""
    assert not found("bank_conflict_padding", global_only)


# a work-efficient scan's shared indices each moved by one slot per 32 (the bank bits of the index)
CONFLICT_FREE_SCAN = """
#define LOG_BANKS 5
#define SKIP(n) ((n) >> LOG_BANKS)
__global__ void scan_up(float* data) {
    __shared__ float t[1024 + 32];
    int a = threadIdx.x, oa = SKIP(a);
    t[a + oa] = data[blockIdx.x * 1024 + a];
    for (int off = 1, d = 512; d > 0; d >>= 1, off *= 2) {
        __syncthreads();
        if (a < d) {
            int ai = off * (2 * a + 1) - 1, bi = off * (2 * a + 2) - 1;
            ai += SKIP(ai);
            bi += SKIP(bi);
            t[bi] += t[ai];
        }
    }
    __syncthreads();
    data[blockIdx.x * 1024 + a] = t[a + oa];
}
"""


def test_an_index_moved_by_its_own_bank_bits_is_a_conflict_free_layout():
    assert found("bank_conflict_padding", CONFLICT_FREE_SCAN)
    # near miss: the index shifted to find a warp's slot, not added to itself
    plain = CONFLICT_FREE_SCAN.replace("int a = threadIdx.x, oa = SKIP(a);", "int a = threadIdx.x, oa = 0;").replace(
        "ai += SKIP(ai);", "").replace("bi += SKIP(bi);", "").replace("1024 + 32", "1024")
    assert plain != CONFLICT_FREE_SCAN and not found("bank_conflict_padding", plain)
    warp_slot = """
__global__ void warp_sums(const float* x, float* y) {
    __shared__ float ws[32];
    int a = threadIdx.x, w = a >> 5;
    float v = x[blockIdx.x * 1024 + a];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((a & 31) == 0) ws[w] = v;
    __syncthreads();
    if (a < 32) y[blockIdx.x * 32 + a] = ws[a];
}
"""
    assert not found("bank_conflict_padding", warp_slot)


# ---------------------------------------------------------------------------------------- persistent_kernel
# blocks walking output tiles by their origins: the first at blockIdx * tile, then a grid's worth of tiles on
TILE_ORIGINS = """
#define BM 64
#define BN 64
__global__ void scale_tiles(const float* a, float* c, int M, int N) {
    for (int r0 = blockIdx.y * BM; r0 < M; r0 += gridDim.y * BM)
        for (int c0 = BN * blockIdx.x; c0 < N; c0 += BN * gridDim.x)
            for (int i = threadIdx.x; i < BM * BN; i += blockDim.x)
                if (r0 + i / BN < M && c0 + i % BN < N)
                    c[(r0 + i / BN) * N + c0 + i % BN] = 2.f * a[(r0 + i / BN) * N + c0 + i % BN];
}
"""


def test_blocks_stepping_over_tile_origins_by_the_grid_are_persistent():
    assert found("persistent_kernel", TILE_ORIGINS)
    # near miss: a thread-level grid stride (gridDim * blockDim) is grid_stride_loop, not a block loop
    stride = """
__global__ void scale(const float* a, float* c, int n) {
    for (int i = blockIdx.x * blockDim.x; i < n; i += gridDim.x * blockDim.x) c[i + threadIdx.x] = 2.f * a[i + threadIdx.x];
}
"""
    assert not found("persistent_kernel", stride)


# ---------------------------------------------------------------------------------------------- radix_sort
# one pass of an LSD radix sort's counting step: the digit at the pass's shift counted per thread
DIGIT_COUNTS = """
__global__ void count_digits(const unsigned* in, unsigned* counts, int n, unsigned shift) {
    unsigned c[16] = {0};
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uint4 v = ((const uint4*)in)[i];
        uint4 d;
        d.x = (v.x >> shift) & 0xFU;
        d.y = (v.y >> shift) & 0xFU;
        c[d.x]++;
        c[d.y]++;
        c[(v.z >> shift) & 0xFU]++;
    }
    for (int d = 0; d < 16; ++d) counts[d * gridDim.x * blockDim.x + blockIdx.x * blockDim.x + threadIdx.x] = c[d];
}
"""

# a warp sorting 32 keys one bit per pass: the bit voted, each key ranked among the zeros or the ones
WARP_SPLIT = """
__global__ void warp_split_sort(unsigned* keys) {
    __shared__ unsigned s[64];
    s[threadIdx.x] = keys[threadIdx.x];
    unsigned off = 0, mask = 1, below = (1u << threadIdx.x) - 1;
    for (int p = 0; p < 32; ++p) {
        unsigned k = s[threadIdx.x + off];
        unsigned b = k & mask;
        unsigned ones = __ballot_sync(0xffffffffu, b);
        unsigned pos = b ? __popc(~ones) + __popc(ones & below) : __popc(~ones & below);
        off ^= 32;
        s[pos + off] = k;
        __syncwarp();
        mask <<= 1;
    }
    keys[threadIdx.x] = s[threadIdx.x + off];
}
"""


def test_a_digit_at_the_passs_shift_counted_without_atomics_is_radix_sort():
    assert found("radix_sort", DIGIT_COUNTS)
    # near miss: a byte histogram at fixed shifts (fields of a packed value, not a pass's digit)
    fixed = DIGIT_COUNTS.replace(">> shift", ">> 8")
    assert fixed != DIGIT_COUNTS and not found("radix_sort", fixed)


def test_a_warp_split_by_a_voted_bit_moving_each_pass_is_radix_sort():
    assert found("radix_sort", WARP_SPLIT)
    # near miss: a ballot of a fixed flag compacted once per pass (a stream compaction, the bit never moves)
    compaction = WARP_SPLIT.replace("mask <<= 1;", "mask |= 1;")
    assert compaction != WARP_SPLIT and not found("radix_sort", compaction)


# ------------------------------------------------------------------------------------------- loop_unrolling
# a block reduction whose last warp runs the halving steps written out, on shared memory or by shuffles
HAND_UNROLLED_TAIL = """
__global__ void block_sum(const float* x, float* out) {
    __shared__ float s[256];
    unsigned t = threadIdx.x;
    s[t] = x[blockIdx.x * 256 + t];
    __syncthreads();
    for (unsigned h = 128; h > 32; h >>= 1) {
        if (t < h) s[t] += s[t + h];
        __syncthreads();
    }
    if (t < 32) {
        volatile float* v = s;
        v[t] += v[t + 32];
        v[t] += v[t + 16];
        v[t] += v[t + 8];
        v[t] += v[t + 4];
        v[t] += v[t + 2];
        v[t] += v[t + 1];
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
"""

SHUFFLE_TAIL = """
__global__ void warp_sums(const float* x, float* out) {
    float v = x[blockIdx.x * 32 + threadIdx.x];
    v += __shfl_xor_sync(0xffffffffu, v, 16);
    v += __shfl_xor_sync(0xffffffffu, v, 8);
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}
"""


def test_halving_steps_written_out_by_hand_are_loop_unrolling():
    assert found("loop_unrolling", HAND_UNROLLED_TAIL)
    assert found("loop_unrolling", SHUFFLE_TAIL)
    # near misses: the same steps as loops (no pragma), and a stencil reading three fixed neighbours
    looped = SHUFFLE_TAIL.replace("""    v += __shfl_xor_sync(0xffffffffu, v, 16);
    v += __shfl_xor_sync(0xffffffffu, v, 8);
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    v += __shfl_xor_sync(0xffffffffu, v, 1);""", "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);")
    assert looped != SHUFFLE_TAIL and not found("loop_unrolling", looped)
    stencil = """
__global__ void taps(const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a = x[i + 32];
    float b = x[i + 1];
    y[i] = a + b + x[i + 2];
}
"""
    assert not found("loop_unrolling", stencil)


# ----------------------------------------------------------------------------------------- double_buffering
# two stages of raw shared addresses: the next tile stored at one while the current is read at the other,
# both flipped by the stage's byte size each tile
XOR_ADDRESSES = """
__global__ void staged(const float* a, float* c, int tiles) {
    __shared__ __align__(16384) char smem[16384];
    unsigned sts = (unsigned)__cvta_generic_to_shared(smem) + threadIdx.x * 4;
    unsigned lds = (unsigned)__cvta_generic_to_shared(smem) + (255 - threadIdx.x) * 4;
    float v = a[threadIdx.x], acc = 0.f;
    asm volatile("st.shared.f32 [%0], %1;" :: "r"(sts), "f"(v));
    __syncthreads();
    for (int t = 1; t < tiles; ++t) {
        v = a[t * 256 + threadIdx.x];
        sts ^= 0x2000;
        asm volatile("st.shared.f32 [%0], %1;" :: "r"(sts), "f"(v));
        float r;
        asm volatile("ld.shared.f32 %0, [%1];" : "=f"(r) : "r"(lds));
        acc += r;
        __syncthreads();
        lds ^= 0x2000;
    }
    c[threadIdx.x] = acc;
}
"""

# a two-stage tile indexed by the tile counter's parity, the next tile written after the counter steps
PARITY_STAGES = """
__global__ void column_sums(const float* w, float* out, int K) {
    __shared__ float tile[2][32][33];
    tile[0][threadIdx.y][threadIdx.x] = w[threadIdx.y * 32 + threadIdx.x];
    float sum = 0.f;
    for (int e = 0; ;) {
        __syncthreads();
        if (e * 32 >= K) break;
        int b = e & 1;
        sum += tile[b][threadIdx.x][threadIdx.y];
        e++;
        b = e & 1;
        if (e * 32 < K) tile[b][threadIdx.y][threadIdx.x] = w[(e * 32 + threadIdx.y) * 32 + threadIdx.x];
    }
    out[threadIdx.y * 32 + threadIdx.x] = sum;
}
"""


def test_shared_addresses_flipped_by_a_stage_size_are_double_buffering():
    assert found("double_buffering", XOR_ADDRESSES)
    # near miss: one flag toggled with ^= 1 (no stage address)
    flag = XOR_ADDRESSES.replace("sts ^= 0x2000;", "").replace("lds ^= 0x2000;", "acc = -acc; int f = 0; f ^= 1;")
    assert flag != XOR_ADDRESSES and not found("double_buffering", flag)


def test_a_stage_taken_again_from_the_stepped_tile_counter_is_double_buffering():
    assert found("double_buffering", PARITY_STAGES)
    # near miss: the stage taken once per tile and written and read at the same parity (no other stage filled)
    one_stage = PARITY_STAGES.replace("""        e++;
        b = e & 1;
        if (e * 32 < K) tile[b]""", """        e++;
        if (e * 32 < K) tile[b]""")
    assert one_stage != PARITY_STAGES and not found("double_buffering", one_stage)


# ------------------------------------------------------------------------------------------- kernel_fusion
BLOCK_HELPERS = """
__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ float block_sum(float v) {
    __shared__ float part[32];
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    v = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x & 31] : 0.f;
    return warp_sum(v);
}
"""

# softmax of a row, one element per thread: the exponential kept in a register across the block's sum
ONE_PER_THREAD = BLOCK_HELPERS + """
__global__ void softmax_row(const float* x, float* y) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    float e = expf(x[idx]);
    float s = block_sum(e);
    y[idx] = e / s;
}
"""

# the statistics computed in a device function the kernel calls, then each thread's outputs written from them
STATS_IN_HELPER = BLOCK_HELPERS + """
__device__ float inv_rms(const float* row, int n) {
    float ss = 0.f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) ss += row[j] * row[j];
    ss = block_sum(ss);
    return rsqrtf(ss / n + 1e-5f);
}
__global__ void rms_scale(float* out, const float* x, int n) {
    float r = inv_rms(x + blockIdx.x * n, n);
    for (int j = 0; j < n; j += blockDim.x)
        out[blockIdx.x * n + j + threadIdx.x] = x[blockIdx.x * n + j + threadIdx.x] * r;
}
"""

# the outputs written through a store helper in a loop after the reduction
STORE_HELPER = BLOCK_HELPERS + """
__device__ void store4(float* dst, const float* src) { *(float4*)dst = *(const float4*)src; }
__global__ void rms_rows4(const float* x, float* out, int n) {
    const float* row = x + blockIdx.x * n;
    float ss = 0.f;
    for (int j = threadIdx.x * 4; j < n; j += blockDim.x * 4) ss += row[j] * row[j];
    float r = rsqrtf(block_sum(ss) / n);
    for (int j = threadIdx.x * 4; j < n; j += blockDim.x * 4) {
        float v[4];
        for (int u = 0; u < 4; ++u) v[u] = row[j + u] * r;
        store4(out + blockIdx.x * n + j, v);
    }
}
"""


def test_a_reduction_then_each_threads_own_output_is_fused():
    assert found("kernel_fusion", ONE_PER_THREAD)
    assert found("kernel_fusion", STATS_IN_HELPER)
    assert found("kernel_fusion", STORE_HELPER)
    # near misses: a block sum written once per block; a warp's sum written at the warp's slot
    per_block = BLOCK_HELPERS + """
__global__ void sums(const float* x, float* out) {
    float s = block_sum(x[blockIdx.x * blockDim.x + threadIdx.x]);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}
"""
    assert not found("kernel_fusion", per_block)
    per_warp = BLOCK_HELPERS + """
__global__ void warp_sums(const float* x, float* out) {
    float s = warp_sum(x[blockIdx.x * blockDim.x + threadIdx.x]);
    if ((threadIdx.x & 31) == 0) out[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = s;
}
"""
    assert not found("kernel_fusion", per_warp)


FLASH_WMMA = """
#include <mma.h>
using namespace nvcuda;
__global__ void attend(const half* q, const half* k, const half* v, float* o) {
    __shared__ float s[16 * 16];
    __shared__ half p[16 * 16];
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fq, fp;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fk;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> fv;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fs, fo;
    wmma::fill_fragment(fs, 0.f);
    wmma::fill_fragment(fo, 0.f);
    wmma::load_matrix_sync(fq, q, 16);
    wmma::load_matrix_sync(fk, k, 16);
    wmma::mma_sync(fs, fq, fk, fs);
    wmma::store_matrix_sync(s, fs, 16, wmma::mem_row_major);
    __syncwarp();
    for (int i = threadIdx.x; i < 256; i += 32) p[i] = __float2half(__expf(s[i]));
    __syncwarp();
    wmma::load_matrix_sync(fp, p, 16);
    wmma::load_matrix_sync(fv, v, 16);
    wmma::mma_sync(fo, fp, fv, fo);
    wmma::store_matrix_sync(o, fo, 16, wmma::mem_row_major);
}
"""


def test_scores_through_exp_into_a_second_product_are_fused():
    assert found("kernel_fusion", FLASH_WMMA)
    # near miss: one product whose scores are scaled and written out (no exponential, no second product)
    single = FLASH_WMMA.split("    __syncwarp();\n    wmma::load_matrix_sync(fp")[0].replace(
        "p[i] = __float2half(__expf(s[i]))", "o[i] = s[i] * 2.f") + "}\n"
    assert "mma_sync" in single and not found("kernel_fusion", single)


# ----------------------------------------------------------------------------------------- coalesced_access
# float4s of a column-major tile: a lane group of 8 threads on 8 consecutive float4s of each column
LANE_GROUP_FLOAT4 = """
#define A(i, j) A[(i) + (j) * lda]
__global__ void copy_tile(int lda, float* A, float* out) {
    int tx = threadIdx.x;
    int row = (tx & 7) << 2, col = tx >> 3;
    A = &A(blockIdx.x * 32, 0);
    float4 v = *((float4 *)(&A(row, col)));
    out[blockIdx.x * 256 + tx] = v.x + v.y + v.z + v.w;
}
"""

# each thread's pointer moved by the thread index times the width its vector copies read
WIDTH_TIMES_THREAD = """
template <typename T, int N>
__device__ void copy_n(T* dst, const T* src) { for (int i = 0; i < N; ++i) dst[i] = src[i]; }
__global__ void row_max(const float* src, float* out, int n) {
    constexpr int ELEMENTS_PER_LDG = 4;  // a 16-byte access's elements
    float r[ELEMENTS_PER_LDG];
    src += blockIdx.x * n + ELEMENTS_PER_LDG * threadIdx.x;
    float m = -1e30f;
    for (int it = 0; it < n; it += 32 * ELEMENTS_PER_LDG) {
        copy_n<float, ELEMENTS_PER_LDG>(r, src + it);
        for (int i = 0; i < ELEMENTS_PER_LDG; ++i) m = fmaxf(m, r[i]);
    }
    out[blockIdx.x * 32 + threadIdx.x] = m;
}
"""

PARENTHESIZED = """
#define LOAD4(p) (reinterpret_cast<const float4 *>(&(p))[0])
__global__ void sum4(const float* x, float* y) {
    int idx = (blockIdx.x * 256 + threadIdx.x) * 4;
    float4 v = LOAD4((x)[idx]);
    y[blockIdx.x * 256 + threadIdx.x] = v.x + v.y + v.z + v.w;
}
"""


def test_lane_groups_on_consecutive_vectors_are_coalesced():
    # (each probe's only global load is the vector one: the store is written so that no older rule sees it)
    assert found("coalesced_access", LANE_GROUP_FLOAT4.replace("out[blockIdx.x * 256 + tx]", "out[tx * 64]"))
    # near miss: the lane group's float4s 64 floats apart (a stride, not a vector's width)
    spread = LANE_GROUP_FLOAT4.replace("int row = (tx & 7) << 2,", "int row = (tx & 7) << 6,").replace(
        "out[blockIdx.x * 256 + tx]", "out[tx * 64]")
    assert "<< 6" in spread and not found("coalesced_access", spread)


def test_the_thread_times_a_named_vector_width_with_copies_of_that_width_is_coalesced():
    assert found("coalesced_access", WIDTH_TIMES_THREAD.replace("out[blockIdx.x * 32 + threadIdx.x]", "out[threadIdx.x * 64]"))
    # near miss: the same offset by a row length (a row per thread), copied with the same helper
    rows = WIDTH_TIMES_THREAD.replace("ELEMENTS_PER_LDG * threadIdx.x", "n * threadIdx.x").replace(
        "out[blockIdx.x * 32 + threadIdx.x]", "out[threadIdx.x * 64]")
    assert rows != WIDTH_TIMES_THREAD and not found("coalesced_access", rows)
    # near miss: a blocked arrangement, each thread's ITEMS consecutive items read one by one
    blocked = WIDTH_TIMES_THREAD.replace("ELEMENTS_PER_LDG", "ITEMS_PER_THREAD").replace(
        "out[blockIdx.x * 32 + threadIdx.x]", "out[threadIdx.x * 64]")
    assert not found("coalesced_access", blocked)


def test_a_parenthesized_array_at_the_thread_index_is_coalesced():
    assert found("coalesced_access", PARENTHESIZED.replace("y[blockIdx.x * 256 + threadIdx.x]", "y[threadIdx.x * 64]"))
    strided = PARENTHESIZED.replace("(blockIdx.x * 256 + threadIdx.x) * 4", "threadIdx.x * 1024").replace(
        "y[blockIdx.x * 256 + threadIdx.x]", "y[threadIdx.x * 64]")
    assert not found("coalesced_access", strided)


# each thread walks a row of its own whose length is a kernel argument (one query row per thread); only the
# per-row statistic is stored at the thread index
ROW_PER_THREAD = """
__global__ void rows(const float* Q, float* m, const int N, const int d) {
    int row = blockIdx.x * blockDim.x;
    float best = -1e30f;
    for (int x = 0; x < d; x++) best = fmaxf(best, Q[row * d + (threadIdx.x * d) + x]);
    m[row + threadIdx.x] = best;
}
"""


def test_a_row_per_thread_of_an_argument_length_is_not_coalesced_beside_one_coalesced_store():
    assert not found("coalesced_access", ROW_PER_THREAD)
    # near miss: the same statistic over a fixed strip per thread (a register tile's columns) keeps the rule
    strip = ROW_PER_THREAD.replace("x < d;", "x < 4;").replace("(threadIdx.x * d) + x", "(threadIdx.x * 4) + x").replace(
        "const int N, const int d", "const int N")
    assert strip != ROW_PER_THREAD and found("coalesced_access", strip)


def test_a_register_sorting_network_by_shuffles_is_no_reduction_before_the_outputs():
    # a warp's bitonic sort in registers: shuffled partners exchanged (min / max chosen apart), each thread's
    # sorted key written at its own element
    warp_sort = """
__global__ void warp_sort(const float* x, float* y) {
    int idx = blockIdx.x * 32 + threadIdx.x;
    float v = x[idx];
    for (int k = 2; k <= 32; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            float p = __shfl_xor_sync(0xffffffffu, v, j);
            bool up = ((threadIdx.x & k) == 0) == ((threadIdx.x & j) == 0);
            v = up ? fminf(v, p) : fmaxf(v, p);
        }
    y[idx] = v;
}
"""
    assert not found("kernel_fusion", warp_sort)
    # the same shape with the shuffled values summed is a reduction, and the outputs use it: fused
    summed = warp_sort.replace("""            float p = __shfl_xor_sync(0xffffffffu, v, j);
            bool up = ((threadIdx.x & k) == 0) == ((threadIdx.x & j) == 0);
            v = up ? fminf(v, p) : fmaxf(v, p);""", "            v += __shfl_xor_sync(0xffffffffu, v, j);").replace(
        "y[idx] = v;", "y[idx] = x[idx] / v;")
    assert summed != warp_sort and found("kernel_fusion", summed)


# ------------------------------------------------------------------------- bank_conflict_padding (swizzles)
# a column XOR-ed with masked row bits before the shared store and the fragment read
SWIZZLE_ASSIGNED = """
__global__ void stage_swizzled(const float4* a, float* out) {
    __shared__ float4 tile[32 * 8];
    int row = threadIdx.x / 8, col = threadIdx.x % 8;
    col = col ^ ((row & 3) << 1);
    tile[row * 8 + col] = a[blockIdx.x * 256 + threadIdx.x];
    __syncthreads();
    out[blockIdx.x * 256 + threadIdx.x] = tile[(threadIdx.x % 32) * 8 + (threadIdx.x / 32)].x;
}
"""

# an address XOR-ed with its own higher bits by a helper (a CuTe-style Swizzle<B, M, S>)
SWIZZLE_HELPER = """
template <int B, int M, int S>
__device__ unsigned swizzle(unsigned addr) {
    constexpr unsigned mask = ((1u << B) - 1) << (M + S);
    return ((addr >> S) & mask) ^ addr;
}
__global__ void copy_swizzled(const float* a, float* out) {
    __shared__ float tile[1024];
    tile[swizzle<3, 2, 3>(threadIdx.x)] = a[blockIdx.x * 1024 + threadIdx.x];
    __syncthreads();
    out[blockIdx.x * 1024 + threadIdx.x] = tile[swizzle<3, 2, 3>(threadIdx.x ^ 1)];
}
"""

# near misses: a hash mixing its bits with no shared memory, and a bitonic partner `i ^ j`
HASH_NO_SHARED = """
__global__ void hash_keys(const unsigned* k, unsigned* h, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { unsigned x = k[i]; x = x ^ ((x >> 16) & 0xffff) << 3; h[i] = x; }
}
"""

BITONIC_PARTNER = """
__global__ void bitonic_step(float* v, int j, int k) {
    __shared__ float s[1024];
    unsigned i = threadIdx.x, p = i ^ j;
    s[i] = v[blockIdx.x * 1024 + i];
    __syncthreads();
    if (p > i && ((i & k) == 0) == (s[i] > s[p])) { float t = s[i]; s[i] = s[p]; s[p] = t; }
    __syncthreads();
    v[blockIdx.x * 1024 + i] = s[i];
}
"""


def test_xor_swizzles_of_masked_or_shifted_bits_are_bank_conflict_padding():
    assert found("bank_conflict_padding", SWIZZLE_ASSIGNED)
    assert found("bank_conflict_padding", SWIZZLE_HELPER)
    assert not found("bank_conflict_padding", HASH_NO_SHARED)
    assert not found("bank_conflict_padding", BITONIC_PARTNER)


# ------------------------------------------------------------------------------------- tensor_cores_mma
LDMATRIX = """
#include <mma.h>
using namespace nvcuda;
__device__ void ldm(unsigned* r, const void* p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.x4.m8n8.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
"""
LDMATRIX_WMMA = LDMATRIX + """
__global__ void frag_wmma(const half* a, const half* b, float* c, unsigned* sink) {
    __shared__ half s[16 * 16];
    s[threadIdx.x] = a[threadIdx.x];
    __syncthreads();
    unsigned r[4];
    ldm(r, &s[(threadIdx.x % 16) * 16]);
    sink[threadIdx.x] = r[0];
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, s, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
"""
LDMATRIX_ALONE = """
__device__ void ldm(unsigned* r, const void* p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.x4.m8n8.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__global__ void frags(const unsigned short* a, unsigned* out) {
    __shared__ unsigned short s[16 * 16];
    s[threadIdx.x] = a[threadIdx.x];
    __syncthreads();
    unsigned r[4];
    ldm(r, &s[(threadIdx.x % 16) * 16]);
    out[threadIdx.x] = r[0] + r[1] + r[2] + r[3];
}
"""


def test_ldmatrix_is_mma_sync_only_outside_a_wmma_kernel():
    assert not found("tensor_cores_mma", LDMATRIX_WMMA)
    assert found("tensor_cores_mma", LDMATRIX_ALONE)


# ------------------------------------------------------------------------------------------- readonly_cache
# a restrict macro and pointers the kernel writes through: the macro's definition names no pointer
RESTRICT_MACRO_WRITTEN = """
#define RESTRICT __restrict__
__global__ void transpose_add(unsigned n, double* RESTRICT a, double* RESTRICT b) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y;
    if (i < n) { b[i * n + j] += a[j * n + i]; a[j * n + i] += 1.0; }
}
"""
RESTRICT_MACRO_READ = RESTRICT_MACRO_WRITTEN.replace("a[j * n + i] += 1.0;", "")


def test_a_restrict_macro_definition_is_not_a_read_only_pointer():
    assert not found("readonly_cache", RESTRICT_MACRO_WRITTEN)
    assert found("readonly_cache", RESTRICT_MACRO_READ)
