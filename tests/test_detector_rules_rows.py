"""Rules for rows and reductions written after the second scoring of the public corpus (issue 24): for each,
a kernel written for the test that the rule must find and a near miss it must not. Build rules are checked
on what the real nvcc builds (skipped without nvcc)."""

from __future__ import annotations

import pytest

from cuda_llm.feature_db import detect_features, load_catalogue

CATALOGUE = {f.id: f for f in load_catalogue()}

WARP_SUM = """template <int W = 32>
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int m = W / 2; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;
}
template <int THREADS>
__device__ float block_sum(float v) {
    static __shared__ float slots[32];
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0) slots[threadIdx.x / 32] = v;
    __syncthreads();
    v = threadIdx.x < THREADS / 32 ? slots[threadIdx.x] : 0.f;
    return warp_sum(v);
}
"""


def found(feature: str, source: str, build=None) -> bool:
    kernels, sass = build if build is not None else ((), None)
    return feature in detect_features(source, kernels, [CATALOGUE[feature]], sass=sass)


# ---------------------------------------------------------------------------------------- single_pass_row
PACKED_HALF_ROW = WARP_SUM + """#include <cuda_fp16.h>
#define AS_F4(v) (reinterpret_cast<float4 *>(&(v))[0])
template <int THREADS>
__global__ void rms_half8(half* x, half* y, int K) {
    const int i = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
    __shared__ float inv;
    half in[8], res[8];
    AS_F4(in[0]) = AS_F4(x[i]);
    float ss = 0.f;
    for (int j = 0; j < 8; ++j) { float f = __half2float(in[j]); ss += f * f; }
    ss = block_sum<THREADS>(ss);
    if (threadIdx.x == 0) inv = rsqrtf(ss / K + 1e-6f);
    __syncthreads();
    for (int j = 0; j < 8; ++j) res[j] = __float2half(__half2float(in[j]) * inv);
    AS_F4(y[i]) = AS_F4(res[0]);
}
template __global__ void rms_half8<256>(half*, half*, int);
"""

# the same statistics, but the output read from global memory again: two passes over the row
PACKED_HALF_TWO_PASS = PACKED_HALF_ROW.replace(
    "res[j] = __float2half(__half2float(in[j]) * inv)", "res[j] = __float2half(__half2float(x[i + j]) * inv)")


def test_a_packed_half_row_held_in_a_register_array_across_the_reduction_is_single_pass():
    assert found("single_pass_row", PACKED_HALF_ROW)
    assert found("kernel_fusion", PACKED_HALF_ROW)
    assert not found("single_pass_row", PACKED_HALF_TWO_PASS)


TEMPLATED_2D_ROW = """template <typename T> struct Max { __device__ T operator()(T a, T b) const { return a < b ? b : a; } };
template <typename acc_t, int B, template <typename> class Op>
__device__ void warp_reduce(acc_t* v) {
    Op<acc_t> op;
    for (int o = 16; o > 0; o /= 2)
        for (int i = 0; i < B; ++i) v[i] = op(v[i], __shfl_xor_sync(0xffffffffu, v[i], o));
}
template <typename acc_t, int B, int IT>
__global__ void scale_by_row_max(acc_t* dst, const acc_t* src, int n) {
    acc_t elements[B][IT];
    for (int b = 0; b < B; ++b)
        for (int it = 0; it < IT; ++it) elements[b][it] = src[(blockIdx.x * B + b) * n + it * 32 + threadIdx.x];
    acc_t mx[B];
    for (int b = 0; b < B; ++b) { mx[b] = elements[b][0]; for (int it = 1; it < IT; ++it) mx[b] = mx[b] > elements[b][it] ? mx[b] : elements[b][it]; }
    warp_reduce<acc_t, B, Max>(mx);
    for (int b = 0; b < B; ++b)
        for (int it = 0; it < IT; ++it) dst[(blockIdx.x * B + b) * n + it * 32 + threadIdx.x] = elements[b][it] / mx[b];
}
template __global__ void scale_by_row_max<float, 2, 4>(float*, const float*, int);
"""


def test_a_two_dimensional_register_array_of_a_template_type_is_a_held_row():
    assert found("single_pass_row", TEMPLATED_2D_ROW)
    # the output loop reading the source again instead of the registers
    two_pass = TEMPLATED_2D_ROW.replace("= elements[b][it] / mx[b]", "= src[(blockIdx.x * B + b) * n + it * 32 + threadIdx.x] / mx[b]")
    assert not found("single_pass_row", two_pass)


ONE_VECTOR_PER_THREAD = WARP_SUM + """template <int THREADS>
__global__ void center_rows(const float* x, float* y, int K) {
    const int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    __shared__ float mean;
    float4 v = reinterpret_cast<const float4*>(x)[i / 4];
    float s = block_sum<THREADS>(v.x + v.y + v.z + v.w);
    if (threadIdx.x == 0) mean = s / K;
    __syncthreads();
    float4 o = make_float4(v.x - mean, v.y - mean, v.z - mean, v.w - mean);
    reinterpret_cast<float4*>(y)[i / 4] = o;
}
template __global__ void center_rows<256>(const float*, float*, int);
"""

# a block sum: the loaded value is the reduction's own argument and is overwritten by its result
BLOCK_SUM_ONLY = WARP_SUM + """template <int THREADS>
__global__ void row_sums(const float* x, float* out) {
    float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    v = block_sum<THREADS>(v);
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}
template __global__ void row_sums<256>(const float*, float*);
"""


def test_one_loaded_vector_per_thread_kept_across_the_block_sum_is_single_pass_and_a_plain_sum_is_not():
    assert found("single_pass_row", ONE_VECTOR_PER_THREAD)
    assert found("kernel_fusion", ONE_VECTOR_PER_THREAD)
    assert not found("single_pass_row", BLOCK_SUM_ONLY)
    # an arg-max: the per-iteration value is overwritten by the shuffled one, never held across
    argmax = WARP_SUM + """__global__ void argmax_rows(const float* x, int* out, int n) {
    float best = -1e30f; int arg = 0;
    for (int c = threadIdx.x; c < n; c += 32) { float val = x[blockIdx.x * n + c]; if (val > best) { best = val; arg = c; } }
    for (int o = 16; o > 0; o >>= 1) {
        float val = __shfl_xor_sync(0xffffffffu, best, o);
        int col = __shfl_xor_sync(0xffffffffu, arg, o);
        if (val > best) { best = val; arg = col; }
    }
    if (threadIdx.x == 0) out[blockIdx.x] = arg;
}
"""
    assert not found("single_pass_row", argmax)


ROW_IN_SHARED = """#include <cub/cub.cuh>
__global__ void softmax_in_shared(const float* x, float* y, int n) {
    __shared__ float row[4096];
    __shared__ float bcast;
    using BR = cub::BlockReduce<float, 256>;
    __shared__ typename BR::TempStorage tmp;
    for (int t = threadIdx.x; t < n; t += blockDim.x) row[t] = x[blockIdx.x * n + t];
    __syncthreads();
    float m = -1e30f;
    for (int t = threadIdx.x; t < n; t += blockDim.x) m = fmaxf(m, row[t]);
    m = BR(tmp).Reduce(m, cub::Max());
    if (threadIdx.x == 0) bcast = m;
    __syncthreads();
    m = bcast;
    for (int t = threadIdx.x; t < n; t += blockDim.x) y[blockIdx.x * n + t] = __expf(row[t] - m);
}
"""

ROW_THROUGH_A_SHARED_POINTER = WARP_SUM + """__global__ void center_warp_rows(const float4* x, float4* y, int C4) {
    extern __shared__ char smem[];
    float4* s_row = reinterpret_cast<float4*>(smem) + threadIdx.y * C4;
    const int row = blockIdx.x * blockDim.y + threadIdx.y;
    float s = 0.f;
    for (int c = threadIdx.x; c < C4; c += 32) {
        const float4 v = __ldcs(x + row * C4 + c);
        s += v.x + v.y + v.z + v.w;
        s_row[c] = v;
    }
    s = warp_sum(s) / (4 * C4);
    for (int c = threadIdx.x; c < C4; c += 32) {
        const float4 v = s_row[c];
        __stcs(y + row * C4 + c, make_float4(v.x - s, v.y - s, v.z - s, v.w - s));
    }
}
"""


def test_a_row_held_in_shared_memory_across_the_reduction_is_single_pass():
    assert found("single_pass_row", ROW_IN_SHARED)
    assert found("single_pass_row", ROW_THROUGH_A_SHARED_POINTER)
    assert found("kernel_fusion", ROW_THROUGH_A_SHARED_POINTER)
    # the output made from the source again: the shared copy only fed the statistics
    assert not found("single_pass_row", ROW_IN_SHARED.replace("__expf(row[t] - m)", "__expf(x[blockIdx.x * n + t] - m)"))


def test_a_warp_slot_array_of_a_block_reduction_is_not_a_shared_row():
    two_reductions = WARP_SUM + """__global__ void softmax_two_pass(const float* x, float* y, int n) {
    __shared__ float slots[32];
    const float* r = x + blockIdx.x * n;
    float m = -1e30f;
    for (int t = threadIdx.x; t < n; t += blockDim.x) m = fmaxf(m, r[t]);
    m = warp_sum(m);
    if (threadIdx.x % 32 == 0) slots[threadIdx.x / 32] = m;
    __syncthreads();
    m = slots[threadIdx.x % 32];
    float s = 0.f;
    for (int t = threadIdx.x; t < n; t += blockDim.x) s += __expf(r[t] - m);
    s = warp_sum(s);
    if (threadIdx.x % 32 == 0) slots[threadIdx.x / 32] = s;
    __syncthreads();
    s = slots[threadIdx.x % 32];
    for (int t = threadIdx.x; t < n; t += blockDim.x) y[blockIdx.x * n + t] = __expf(r[t] - m) / s;
}
"""
    assert not found("single_pass_row", two_reductions)


# ---------------------------------------------------------------------------------------- kernel_fusion
FUSED_IN_A_DEVICE_FUNCTION = """__device__ void row_stats(const float* v, int n, float& mu) {
    float s = 0.f;
    for (int i = threadIdx.x; i < n; i += 32) s += v[i];
    for (int o = 0; o < 5; ++o) s += __shfl_sync(0xffffffffu, s, (threadIdx.x + (1 << o)) & 31);
    mu = s / n;
}
template <typename T>
__device__ void apply_row(T* out, const T* in, const T* gamma, int rows, int n) {
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        float mu;
        row_stats(in + r * n, n, mu);
        for (int i = threadIdx.x; i < n; i += 32) out[r * n + i] = gamma[i] * (in[r * n + i] - mu);
    }
}
template <typename T>
__global__ void center(T* out, const T* in, const T* gamma, int rows, int n) { apply_row<T>(out, in, gamma, rows, n); }
template __global__ void center<float>(float*, const float*, const float*, int, int);
"""


def test_a_kernel_whose_device_function_reduces_then_writes_outputs_is_fused():
    assert found("kernel_fusion", FUSED_IN_A_DEVICE_FUNCTION)
    # the statistics only: the device function writes one value, no output loop
    stats_only = FUSED_IN_A_DEVICE_FUNCTION.replace(
        "for (int i = threadIdx.x; i < n; i += 32) out[r * n + i] = gamma[i] * (in[r * n + i] - mu);",
        "if (threadIdx.x == 0) out[r] = mu;")
    assert not found("kernel_fusion", stats_only)


# ---------------------------------------------------------------------------------------- warp_per_row
WARP_PER_Y_ROW_ALIASED = """#include <cub/cub.cuh>
__global__ void gemv_rows(const float* A, const float* x, float* y, int M, int N, int chunks) {
    int bx = blockIdx.x;
    int row = blockDim.y * bx + threadIdx.y;
    if (row >= M) return;
    float acc = 0.f;
    for (int i = 0; i < chunks; ++i) {
        int c = 4 * threadIdx.x + i * 32 * 4;
        if (c < N) acc += A[row * N + c] * x[c];
    }
    using WR = cub::WarpReduce<float>;
    __shared__ typename WR::TempStorage tmp[8];
    acc = WR(tmp[threadIdx.y]).Sum(acc);
    if (threadIdx.x == 0) y[row] = acc;
}
"""


def test_a_y_row_from_a_block_index_alias_reduced_by_cub_warp_reduce_is_warp_per_row():
    source = WARP_PER_Y_ROW_ALIASED.replace("using WR = cub::WarpReduce<float>;", "using WarpReduce = cub::WarpReduce<float>;") \
        .replace("typename WR::", "typename WarpReduce::").replace("acc = WR(", "acc = WarpReduce(")
    assert found("warp_per_row", source)
    # a thread per y row: the x lanes do not split the row
    assert not found("warp_per_row", source.replace("int c = 4 * threadIdx.x + i * 32 * 4;", "int c = i;"))


# ---------------------------------------------------------------------------------------- warp_shuffle
def test_the_index_shuffle_a_grid_sync_emits_is_no_warp_shuffle(tmp_path):
    from tests.test_detector_rules import built

    grid_sync = """#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void two_phase(float* out, const float* in, int n) {
    cg::grid_group grid = cg::this_grid();
    if (grid.thread_rank() < n) out[grid.thread_rank()] = in[grid.thread_rank()] * 2.f;
    grid.sync();
    if (grid.thread_rank() == 0) out[0] += 1.f;
}
"""
    assert not found("warp_shuffle", grid_sync, built(tmp_path, grid_sync))
    cg_reduce = """#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
__global__ void warp_sums(float* out, const float* in) {
    auto warp = cg::tiled_partition<32>(cg::this_thread_block());
    float v = cg::reduce(warp, in[threadIdx.x], cg::plus<float>());
    if (warp.thread_rank() == 0) out[threadIdx.x / 32] = v;
}
"""
    no_source = cg_reduce.replace("cg::reduce(", "cg_reduce_alias(").replace(
        "namespace cg = cooperative_groups;", "namespace cg = cooperative_groups;\n#define cg_reduce_alias cg::reduce")
    assert found("warp_shuffle", no_source, built(tmp_path, no_source))


# ---------------------------------------------------------------------------------------- online_softmax
def test_a_rescale_factor_applied_by_a_fused_multiply_add_is_an_online_softmax():
    source = """__global__ void attn_row(const float* s, const float* v, float* o, int n) {
    float m_old = -1e30f, l = 0.f, acc = 0.f;
    for (int j = 0; j < n; ++j) {
        float m_new = fmaxf(m_old, s[j]);
        float factor = __expf(m_old - m_new);
        float p = __expf(s[j] - m_new);
        l = __fmaf_rn(factor, l, p);
        acc = __fmaf_rn(p, v[j], factor * acc);
        m_old = m_new;
    }
    o[threadIdx.x] = acc / l;
}
"""
    assert found("online_softmax", source)
    # an exp used by an fma that is no rescale: the exponent's difference feeds the product's second factor
    plain = """__global__ void softmax_dot(const float* s, const float* v, float* o, float m, int n) {
    float acc = 0.f;
    for (int j = 0; j < n; ++j) { float p = __expf(s[j] * 2.f); acc = __fmaf_rn(v[j], p, acc); }
    o[threadIdx.x] = acc;
}
"""
    assert not found("online_softmax", plain)


# ---------------------------------------------------------------------------------------- radix_sort
def test_the_digits_of_several_passes_counted_into_one_histogram_each_are_a_radix_sort():
    bytes_view = """__global__ void upfront_hist(const unsigned* keys, unsigned* hist, int n) {
    __shared__ unsigned h0[256], h1[256], h2[256], h3[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) h0[i] = h1[i] = h2[i] = h3[i] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        unsigned k = keys[i];
        atomicAdd(&h0[reinterpret_cast<unsigned char*>(&k)[0]], 1);
        atomicAdd(&h1[reinterpret_cast<unsigned char*>(&k)[1]], 1);
        atomicAdd(&h2[reinterpret_cast<unsigned char*>(&k)[2]], 1);
        atomicAdd(&h3[reinterpret_cast<unsigned char*>(&k)[3]], 1);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 256; i += blockDim.x) { atomicAdd(&hist[i], h0[i]); atomicAdd(&hist[256 + i], h1[i]); }
}
"""
    assert found("radix_sort", bytes_view)
    shifted = """__global__ void digit_hists(const unsigned* keys, unsigned* g0, unsigned* g1, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { unsigned key = keys[i]; atomicAdd(&g0[key >> 0 & 255u], 1u); atomicAdd(&g1[key >> 8 & 255u], 1u); }
}
"""
    assert found("radix_sort", shifted)
    # a byte histogram: every byte of a word counted into the same histogram
    byte_hist = bytes_view.replace("&h1[", "&h0[").replace("&h2[", "&h0[").replace("&h3[", "&h0[")
    assert not found("radix_sort", byte_hist)


# ---------------------------------------------------------------------------------------- block_reduction_tree
def test_a_cub_block_reduce_is_a_block_reduction_and_a_warp_reduce_is_not():
    block = """#include <cub/cub.cuh>
__global__ void block_max(const float* x, float* out) {
    using BlockReduce = cub::BlockReduce<float, 256>;
    __shared__ typename BlockReduce::TempStorage tmp;
    float v = BlockReduce(tmp).Reduce(x[blockIdx.x * 256 + threadIdx.x], cub::Max());
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}
"""
    assert found("block_reduction_tree", block)
    warp = block.replace("cub::BlockReduce<float, 256>", "cub::WarpReduce<float>").replace("BlockReduce", "WarpReduce")
    assert not found("block_reduction_tree", warp)


def test_a_halving_tree_whose_upper_half_hands_partials_to_the_lower_half_is_a_block_reduction():
    source = """__device__ void merge(float b, float& a) { a += b; }
__global__ void warp_partials(const float* x, float* out) {
    extern __shared__ float buf[];
    float s = x[blockIdx.x * blockDim.x * blockDim.y + threadIdx.y * blockDim.x + threadIdx.x];
    for (int o = 16; o > 0; o /= 2) s += __shfl_down_sync(0xffffffffu, s, o);
    for (int offset = blockDim.y / 2; offset > 0; offset /= 2) {
        if (threadIdx.x == 0 && threadIdx.y >= offset && threadIdx.y < 2 * offset) {
            const int w = threadIdx.y - offset;
            buf[w] = s;
        }
        __syncthreads();
        if (threadIdx.x == 0 && threadIdx.y < offset) {
            float b = buf[threadIdx.y];
            merge(b, s);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0 && threadIdx.y == 0) out[blockIdx.x] = s;
}
"""
    assert found("block_reduction_tree", source)
    # a doubling loop (a scan's step), not a halving one
    scan = source.replace("for (int offset = blockDim.y / 2; offset > 0; offset /= 2)",
                          "for (int offset = 1; offset < blockDim.y; offset *= 2)")
    assert not found("block_reduction_tree", scan)


# ---------------------------------------------------------------------------------------- persistent_kernel
def test_blocks_looping_over_rows_by_the_grids_y_size_are_persistent_not_grid_stride():
    source = """__global__ void rows_by_y(const float* x, float* y, int rows, int n) {
    for (auto r = blockIdx.y; r < rows; r += gridDim.y)
        for (int i = threadIdx.x; i < n; i += blockDim.x) y[r * n + i] = 2.f * x[r * n + i];
}
"""
    assert found("persistent_kernel", source)
    assert not found("grid_stride_loop", source)
    # a block's own row, no loop by the grid
    assert not found("persistent_kernel", source.replace("r += gridDim.y", "r += rows"))


# ---------------------------------------------------------------------------------------- loop_unrolling
@pytest.mark.parametrize("body, expected", [
    ("for (int k = 0; k < 4; ++k) s += v[l + k];", True),
    ("s += v[l];", False),
])
def test_a_strided_loop_handling_several_consecutive_elements_per_step_is_unrolled(body, expected):
    source = """__global__ void sum4(const float* v, float* out, int n) {
    const int numx = blockDim.x;
    float s = 0.f;
    int l = 4 * threadIdx.x;
    for (; l + 3 < n; l += 4 * numx) { BODY }
    for (; l < n; ++l) s += v[l];
    out[threadIdx.x] = s;
}
""".replace("BODY", body)
    assert found("loop_unrolling", source) is expected


CHAINED_TREE = """template <unsigned blockSize>
__global__ void reduce_chained(const float* g_idata, float* g_odata, unsigned n) {
    extern __shared__ float sdata[];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * (blockSize * 2) + threadIdx.x;
    float mySum = (i < n) ? g_idata[i] : 0;
    sdata[tid] = mySum;
    __syncthreads();
    if (blockSize >= 512 && tid < 256) sdata[tid] = mySum = mySum + sdata[tid + 256];
    __syncthreads();
    if (blockSize >= 256 && tid < 128) sdata[tid] = mySum = mySum + sdata[tid + 128];
    __syncthreads();
    if (blockSize >= 128 && tid < 64) sdata[tid] = mySum = mySum + sdata[tid + 64];
    __syncthreads();
    if (tid == 0) g_odata[blockIdx.x] = mySum;
}
template __global__ void reduce_chained<256>(const float*, float*, unsigned);
"""


def test_a_step_by_step_tree_carried_through_a_register_is_a_block_reduction():
    assert found("block_reduction_tree", CHAINED_TREE)
    # neighbours at a negative offset (a stencil's or a scan's read), not i + stride
    assert not found("block_reduction_tree", CHAINED_TREE.replace("sdata[tid + ", "sdata[tid - "))


SLOTS_ANY_NAME = """__global__ void block_total(const float* x, float* out) {
    __shared__ float partial[32];
    float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    const int w = threadIdx.x / warpSize;
    if ((threadIdx.x & 31) == 0) partial[w] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x & 31] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    }
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}
"""


def test_per_warp_slots_read_back_at_the_lane_and_reduced_again_are_a_block_reduction_whatever_the_warp_index_is_called():
    assert found("block_reduction_tree", SLOTS_ANY_NAME)
    # a block scan: the warps' totals are scanned (shuffled up), not reduced
    assert not found("block_reduction_tree", SLOTS_ANY_NAME.replace("__shfl_down_sync", "__shfl_up_sync"))


SPLIT_RADIX = """__global__ void split_sort(unsigned* keys, int n) {
    __shared__ unsigned flags[1024];
    __shared__ unsigned tmp[1024];
    unsigned key = keys[threadIdx.x];
    for (int bit = 0; bit < 32; ++bit) {
        unsigned b = (key >> bit) & 1;
        flags[threadIdx.x] = !b;
        __syncthreads();
        for (int o = 1; o < blockDim.x; o <<= 1) {
            unsigned v = threadIdx.x >= o ? flags[threadIdx.x - o] : 0;
            __syncthreads();
            flags[threadIdx.x] += v;
            __syncthreads();
        }
        unsigned zeros = flags[blockDim.x - 1];
        unsigned pos = b ? zeros + threadIdx.x - (flags[threadIdx.x]) : flags[threadIdx.x] - 1;
        tmp[pos] = key;
        __syncthreads();
        key = tmp[threadIdx.x];
        __syncthreads();
    }
    keys[threadIdx.x] = key;
}
"""


def test_a_one_bit_split_over_the_keys_bits_is_a_radix_sort_and_a_bit_reversal_is_not():
    assert found("radix_sort", SPLIT_RADIX)
    bit_reverse = """__global__ void reverse_bits(unsigned* v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned x = v[i], r = 0;
    for (int bit = 0; bit < 32; ++bit) r |= ((x >> bit) & 1) << (31 - bit);
    v[i] = r;
}
"""
    assert not found("radix_sort", bit_reverse)


def test_cub_radix_sorts_are_radix_sorts_and_cub_reductions_are_warp_shuffles():
    block_sort = """#include <cub/cub.cuh>
__global__ void sort_tiles(unsigned* keys) {
    using Sort = cub::BlockRadixSort<unsigned, 128, 4>;
    __shared__ typename Sort::TempStorage tmp;
    unsigned k[4];
    for (int i = 0; i < 4; ++i) k[i] = keys[blockIdx.x * 512 + threadIdx.x * 4 + i];
    Sort(tmp).Sort(k);
    for (int i = 0; i < 4; ++i) keys[blockIdx.x * 512 + threadIdx.x * 4 + i] = k[i];
}
"""
    assert found("radix_sort", block_sort)
    assert not found("radix_sort", block_sort.replace("cub::BlockRadixSort<unsigned, 128, 4>", "cub::BlockMergeSort<unsigned, 128, 4>"))
    assert found("warp_shuffle", WARP_PER_Y_ROW_ALIASED)
    # a block scan through CUB is no reduction (and names no shuffle)
    scan = """#include <cub/cub.cuh>
__global__ void scan_tile(int* d) {
    using Scan = cub::BlockScan<int, 128>;
    __shared__ typename Scan::TempStorage tmp;
    int v = d[threadIdx.x];
    Scan(tmp).ExclusiveSum(v, v);
    d[threadIdx.x] = v;
}
"""
    assert not found("warp_shuffle", scan)


def test_a_loaded_value_compared_with_its_block_maximum_is_no_held_row():
    block_argmax = WARP_SUM + """__device__ float block_max(float v) { for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m)); return v; }
__global__ void is_max(const float* x, int* out) {
    float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    float m = block_max(v);
    if (v == m) out[blockIdx.x] = threadIdx.x;
}
"""
    assert not found("single_pass_row", block_argmax)


def test_cub_reductions_through_a_type_alias_are_found():
    aliased = WARP_PER_Y_ROW_ALIASED
    assert "WarpReduce(" not in aliased
    assert found("warp_per_row", aliased) and found("warp_shuffle", aliased)
    block = """#include <cub/cub.cuh>
__global__ void block_sum(const float* x, float* out) {
    using R = cub::BlockReduce<float, 128>;
    __shared__ typename R::TempStorage tmp;
    float s = R(tmp).Sum(x[blockIdx.x * 128 + threadIdx.x]);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}
"""
    assert found("block_reduction_tree", block)
    assert not found("block_reduction_tree", block.replace("cub::BlockReduce<float, 128>", "cub::BlockLoad<float, 128, 1>").replace(".Sum(", ".Load("))


def test_a_register_row_reduced_by_a_shared_halving_tree_is_single_pass():
    # a template element type: the held array is no float[] (the first rule's types), so the tree is what counts
    source = """template <typename T>
__global__ void softmax_tree(const T* x, T* y, int n) {
    __shared__ T red[256];
    T v[4];
    T m = -1e30f;
    for (int j = 0; j < 4; ++j) { v[j] = x[blockIdx.x * n + j * 256 + threadIdx.x]; m = fmaxf(m, v[j]); }
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    for (int j = 0; j < 4; ++j) y[blockIdx.x * n + j * 256 + threadIdx.x] = __expf(v[j] - m);
}
template __global__ void softmax_tree<float>(const float*, float*, int);
"""
    assert found("single_pass_row", source)
    assert found("kernel_fusion", source)
    # the output made from the source read again: the registers fed the maximum only
    assert not found("single_pass_row", source.replace("__expf(v[j] - m)", "__expf(x[blockIdx.x * n + j * 256 + threadIdx.x] - m)"))


@pytest.mark.parametrize("update, expected", [
    ("l = l * exp2f((m - mn) * 1.4427f) + exp2f((x[i] - mn) * 1.4427f);", True),    # base 2, scaled difference
    ("float a = __expf(m - mn); l = a * l + __expf(x[i] - mn);", True),               # the factor multiplied first
    ("l = x[i] * __expf(-x[i] * 1.4427f) + l;", False),                              # a negation, no old max
    ("l = l + __expf(x[i] - mn);", False),                                           # no rescale of the sum
])
def test_a_running_sum_rescaled_however_the_exponent_is_written_is_an_online_softmax(update, expected):
    source = """__global__ void running(const float* x, float* y, int n) {
    float m = -1e30f, l = 0.f;
    for (int i = 0; i < n; ++i) { float mn = fmaxf(m, x[i]); UPDATE m = mn; }
    y[threadIdx.x] = l;
}
""".replace("UPDATE", update)
    assert found("online_softmax", source) is expected


EPILOGUE_HELPER = """__device__ float act(float v) { return v / (1.f + __expf(-v)); }
__global__ void gemm_act(const float* A, const float* B, float* C, int M, int N, int K) {
    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[r * K + k] * B[k * N + c];
    C[r * N + c] = act(acc);
}
"""


def test_a_product_stored_through_a_device_function_applying_a_nonlinearity_is_fused():
    assert found("kernel_fusion", EPILOGUE_HELPER)
    # a linear helper (a scale) is no epilogue nonlinearity
    assert not found("kernel_fusion", EPILOGUE_HELPER.replace("return v / (1.f + __expf(-v));", "return 2.f * v;"))
