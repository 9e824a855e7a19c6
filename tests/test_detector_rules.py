"""One rule at a time: for every detector rule written from the definitions in docs/features.md after the
public corpus's first scoring, a kernel written for the test that the rule must find and a near miss it
must not. Build rules are checked on what the real nvcc builds (skipped without nvcc)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda_llm.feature_db import detect_features, load_catalogue
from cuda_llm.feature_db.source_views import canonical

CATALOGUE = {f.id: f for f in load_catalogue()}


def found(feature: str, source: str, build=None) -> bool:
    kernels, sass = build if build is not None else ((), None)
    return feature in detect_features(source, kernels, [CATALOGUE[feature]], sass=sass)


def built(tmp_path: Path, source: str):
    """(kernels, SASS summary) of the source as nvcc builds it for sm_90."""
    from cuda_llm.tools.compiler.build_facts import build_facts
    from cuda_llm.tools.compiler.compile import nvcc_path

    try:
        nvcc = nvcc_path()
    except Exception:
        nvcc = shutil.which("nvcc")
    if not nvcc:
        pytest.skip("needs nvcc")
    path = tmp_path / "k.cu"
    path.write_text(source)
    return build_facts(path, "sm_90", nvcc=nvcc)


def test_shared_arrays_with_an_alignment_attribute_are_renamed_too():
    out = canonical("__shared__ alignas(alignof(float4)) float As[4][16]; __shared__ __align__(16) float B[3];"
                    " x = As[j][0] + B[1];")
    assert "float __sm_As[4][16]" in out and "float __sm_B[3]" in out and "__sm_As[j][0] + __sm_B[1]" in out


# ---------------------------------------------------------------------------------------- double_buffering
SPLIT_BLOCK = """template <int BM, int BK>
__device__ void compute(float* acc, const float* As) { for (int k = 0; k < BK; ++k) acc[0] += As[k * BM + threadIdx.x % BM]; }
template <int BM, int BK>
__device__ void load(const float* A, float* As, int K) { As[threadIdx.x % (BM * BK)] = A[threadIdx.x % (BM * BK)]; }
template <int BM, int BK>
__global__ void two_halves(const float* A, float* C, int K) {
    __shared__ float As[2 * BM * BK];
    float acc[1] = {0.f};
    bool second = threadIdx.x >= blockDim.x / 2;
    for (int k = 0; k < K; k += 2 * BK) {
        if (!second) { compute<BM, BK>(acc, As); load<BM, BK>(A + k + BK, As + (BM * BK), K); }
        else { load<BM, BK>(A + k, As, K); compute<BM, BK>(acc, As + (BM * BK)); }
        __syncthreads();
    }
    C[threadIdx.x] = acc[0];
}
template __global__ void two_halves<64, 8>(const float*, float*, int);
"""


def test_a_flat_two_stage_array_whose_second_stage_is_the_array_plus_one_stage_is_double_buffering():
    assert found("double_buffering", SPLIT_BLOCK)
    # near miss: one stage of the product size, the offset an element inside it
    one_stage = SPLIT_BLOCK.replace("As[2 * BM * BK]", "As[BM * BK]").replace("As + (BM * BK)", "As + BM")
    assert not found("double_buffering", one_stage)


PIPELINE = """#include <cuda/pipeline>
__global__ void ring(const float* A, float* C, int tiles) {
    constexpr int stages = 3;
    __shared__ alignas(16) float As[stages][256];
    cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
    float acc = 0.f;
    int fetched = 0;
    for (int t = 0; t < tiles; ++t) {
        for (; fetched < tiles && fetched < t + stages; ++fetched) {
            pipe.producer_acquire();
            const int s = fetched % stages;
            cuda::memcpy_async(&As[s][threadIdx.x], &A[fetched * 256 + threadIdx.x], sizeof(float), pipe);
            pipe.producer_commit();
        }
        pipe.consumer_wait();
        __syncthreads();
        const int j = t % stages;
        acc += As[j][(threadIdx.x + 1) % 256];
        pipe.consumer_release();
    }
    C[threadIdx.x] = acc;
}
"""


def test_a_pipeline_ring_indexed_modulo_the_stages_is_double_buffering():
    assert found("double_buffering", PIPELINE)
    # near miss: the same pipeline into one shared buffer, waited for right after each copy
    single = """#include <cuda/pipeline>
__global__ void one(const float* A, float* C, int tiles) {
    __shared__ float As[256];
    cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
    float acc = 0.f;
    for (int t = 0; t < tiles; ++t) {
        pipe.producer_acquire();
        cuda::memcpy_async(&As[threadIdx.x], &A[t * 256 + threadIdx.x], sizeof(float), pipe);
        pipe.producer_commit();
        pipe.consumer_wait();
        __syncthreads();
        const int j = t % 256;
        acc += As[(threadIdx.x + j) % 256];
        pipe.consumer_release();
        __syncthreads();
    }
    C[threadIdx.x] = acc;
}
"""
    assert not found("double_buffering", single)


# -------------------------------------------------------------------------------------- privatized_atomics
SHARED_ATOMIC_BINS = """__device__ void bump(unsigned* h, unsigned v) { atomicAdd(h + v, 1u); }
__global__ void bins(const unsigned* in, unsigned* out, int n) {
    __shared__ unsigned local[64];
    for (int b = threadIdx.x; b < 64; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        bump(local, in[i] & 63);
    __syncthreads();
    for (int b = threadIdx.x; b < 64; b += blockDim.x) out[blockIdx.x * 64 + b] = local[b];
}
"""
SHARED_COUNTER = """__global__ void compact(const float* in, float* out, int* total, int n) {
    __shared__ int count;
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int slot = -1;
    if (i < n && in[i] > 0.f) slot = atomicAdd(&count, 1);
    __syncthreads();
    if (slot >= 0) out[blockIdx.x * blockDim.x + slot] = in[i];
    if (threadIdx.x == 0) total[blockIdx.x] = count;
}
"""


def test_shared_atomics_into_a_shared_array_are_privatized_by_the_build(tmp_path):
    assert not found("privatized_atomics", SHARED_ATOMIC_BINS)      # the source rules see no atomic on local
    assert found("privatized_atomics", SHARED_ATOMIC_BINS, built(tmp_path, SHARED_ATOMIC_BINS))
    # near miss: one shared counter (ATOMS too, but a slot allocator, not a private copy)
    assert not found("privatized_atomics", SHARED_COUNTER, built(tmp_path, SHARED_COUNTER))


PER_THREAD_COPIES = """__device__ void add(unsigned char* base, unsigned v) { base[(v & 63) * 128]++; }
__global__ void sub_histograms(unsigned* partial, const unsigned* in, int n) {
    __shared__ unsigned char hist[128 * 64];
    const unsigned pos = (threadIdx.x & 96) | ((threadIdx.x & 31) ^ 5);
    unsigned char* mine = hist + pos;
    for (int b = 0; b < 64; ++b) mine[b * 128] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) add(mine, in[i]);
    __syncthreads();
    if (threadIdx.x < 64) {
        unsigned sum = 0;
        for (int t = 0; t < 128; ++t) sum += hist[threadIdx.x * 128 + t];
        partial[blockIdx.x * 64 + threadIdx.x] = sum;
    }
}
"""


def test_per_thread_copies_in_shared_memory_incremented_by_a_helper_are_privatized():
    assert found("privatized_atomics", PER_THREAD_COPIES)
    # near miss: a pointer to the thread's slot of a shared staging row, the helper increments a global array
    staging = PER_THREAD_COPIES.replace("add(mine, in[i])", "add((unsigned char*)partial, in[i])")
    assert not found("privatized_atomics", staging)


# ------------------------------------------------------------------------------------------- warp_per_row
WARP_ID_ROW = """__global__ void row_max(const float* x, float* y, int rows, int cols) {
    int warp = threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    int row = blockIdx.x * (blockDim.x / 32) + warp;
    if (row >= rows) return;
    float m = -1e30f;
    for (int c = lane; c < cols; c += 32) m = fmaxf(m, x[row * cols + c]);
    for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    if (lane == 0) y[row] = m;
}
"""


def test_a_row_indexed_by_the_warp_index_variable_is_warp_per_row():
    assert found("warp_per_row", WARP_ID_ROW)
    # near miss: the warp index computed, but the row is the thread's (a row per thread)
    thread_row = WARP_ID_ROW.replace("int row = blockIdx.x * (blockDim.x / 32) + warp;",
                                     "int row = blockIdx.x * blockDim.x + threadIdx.x; (void)warp;")
    assert not found("warp_per_row", thread_row)


Y_ROWS = """__device__ float warp_sum(float v) { for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffff, v, o); return v; }
__global__ void row_sum(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= rows) return;
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += 32) s += x[row * cols + c];
    s = warp_sum(s);
    if (threadIdx.x == 0) y[row] = s;
}
"""


def test_a_warp_per_y_row_reduced_with_shuffles_is_warp_per_row():
    assert found("warp_per_row", Y_ROWS)
    # near miss: y rows whose x threads stride by the block width and meet in shared memory
    shared = Y_ROWS.replace("c += 32", "c += blockDim.x").replace("s = warp_sum(s);", "__shared__ float p[32][33]; p[threadIdx.y][threadIdx.x] = s;")
    assert not found("warp_per_row", shared.replace("__device__ float warp_sum(float v) { for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffff, v, o); return v; }\n", ""))


# ----------------------------------------------------------------------------------- block_reduction_tree
WHILE_HALVING = """#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void block_sum(const float* x, float* out, int n) {
    extern __shared__ float s[];
    cg::thread_block cta = cg::this_thread_block();
    unsigned rank = cta.thread_rank();
    float v = 0.f;
    for (int i = blockIdx.x * blockDim.x + rank; i < n; i += gridDim.x * blockDim.x) v += x[i];
    s[rank] = v;
    unsigned half = blockDim.x >> 1;
    while (half > 0) {
        cta.sync();
        if (rank < half) { v += s[rank + half]; s[rank] = v; }
        half >>= 1;
    }
    if (rank == 0) out[blockIdx.x] = v;
}
"""
BITONIC = """__device__ void cmp_swap(unsigned& a, unsigned& b, unsigned dir) { if ((a > b) == dir) { unsigned t = a; a = b; b = t; } }
__global__ void bitonic(unsigned* keys, unsigned dir) {
    __shared__ unsigned s[1024];
    s[threadIdx.x] = keys[blockIdx.x * 1024 + threadIdx.x];
    s[threadIdx.x + 512] = keys[blockIdx.x * 1024 + threadIdx.x + 512];
    for (unsigned stride = 512; stride > 0; stride >>= 1) {
        __syncthreads();
        unsigned pos = 2 * threadIdx.x - (threadIdx.x & (stride - 1));
        cmp_swap(s[pos], s[pos + stride], dir);
    }
    unsigned stride = 512;
    while (stride > 0) {
        __syncthreads();
        unsigned pos = 2 * threadIdx.x - (threadIdx.x & (stride - 1));
        cmp_swap(s[pos], s[pos + stride], dir);
        stride >>= 1;
    }
    __syncthreads();
    keys[blockIdx.x * 1024 + threadIdx.x] = s[threadIdx.x];
}
"""


def test_a_halving_while_loop_is_a_block_reduction_and_a_comparator_network_is_not():
    assert found("block_reduction_tree", WHILE_HALVING)
    assert not found("block_reduction_tree", BITONIC)


WARP_SLOTS_STRIDED = """#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
__global__ void block_sum(const float* x, float* out, int n) {
    __shared__ float s[1024];
    cg::thread_block cta = cg::this_thread_block();
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(cta);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = cg::reduce(tile, i < n ? x[i] : 0.f, cg::plus<float>());
    cta.sync();
    if (threadIdx.x == 0) {
        float total = 0.f;
        for (int w = 0; w < blockDim.x; w += tile.size()) total += s[w];
        out[blockIdx.x] = total;
    }
}
"""


def test_warp_results_read_back_from_every_warps_slot_are_a_block_reduction():
    assert found("block_reduction_tree", WARP_SLOTS_STRIDED)
    # near miss: the warp results go straight to a global atomic; the shared array only stages the input
    to_atomics = WARP_SLOTS_STRIDED.replace("for (int w = 0; w < blockDim.x; w += tile.size()) total += s[w];",
                                            "total = s[threadIdx.x];").replace(
        "out[blockIdx.x] = total;", "") .replace("if (threadIdx.x == 0) {", "if (tile.thread_rank() == 0) { atomicAdd(out, s[threadIdx.x]);")
    assert not found("block_reduction_tree", to_atomics)


# ------------------------------------------------------------------------------------------ kernel_fusion
GRID_PHASES = """#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void two_phases(const float* x, float* partial, float* out, int n) {
    cg::grid_group grid = cg::this_grid();
    int i = grid.thread_rank();
    if (i < n) partial[i] = x[i] * 2.f;
    cg::sync(grid);
    if (i == 0) { float s = 0.f; for (int k = 0; k < n; ++k) s += partial[k]; out[0] = s; }
}
"""


def test_phases_joined_by_a_grid_group_sync_are_fused():
    assert found("kernel_fusion", GRID_PHASES)
    # near miss: the grid group only numbers the threads; the phases meet at a block barrier
    block_only = GRID_PHASES.replace("cg::sync(grid);", "__syncthreads();")
    assert not found("kernel_fusion", block_only)


# ----------------------------------------------------------------------------------------- online_softmax
def test_two_partial_sums_brought_to_one_new_max_are_an_online_softmax():
    merge = """__global__ void merge(const float* m, const float* l, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float m_prev = m[2 * i], m_cur = m[2 * i + 1];
    float m_new = fmaxf(m_prev, m_cur);
    float l_new = (__expf(m_prev - m_new) * l[2 * i]) + (__expf(m_cur - m_new) * l[2 * i + 1]);
    out[i] = l_new;
}
"""
    assert found("online_softmax", merge)
    # near miss: two exponentials against different maxima (no common rescaling), as in a ratio of softmaxes
    apart = merge.replace("(__expf(m_cur - m_new)", "(__expf(m_cur - m_prev)")
    assert not found("online_softmax", apart)


# ------------------------------------------------------------------------------------ bank_conflict_padding
def test_a_bank_macro_no_code_uses_is_no_permutation():
    used = """#define BANKS 32
__global__ void k(float* out) {
    __shared__ float s[1024];
    s[(threadIdx.x * 4) % BANKS + threadIdx.x / BANKS * BANKS] = 1.f;
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x];
}
"""
    assert found("bank_conflict_padding", used)
    unused = """#define BANKS 32
#define BLOCK (4 * BANKS)
__global__ void k(float* out) {
    __shared__ float s[1024];
    s[threadIdx.x] = 1.f;
    __syncthreads();
    out[threadIdx.x] = s[1023 - threadIdx.x];
}
"""
    assert not found("bank_conflict_padding", unused)


PADDED = """#define TILE 32
__global__ void transpose(const float* in, float* out, int n) {
    __shared__ float t[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    t[threadIdx.y][threadIdx.x] = in[y * n + x];
    __syncthreads();
    out[(blockIdx.x * TILE + threadIdx.y) * n + blockIdx.y * TILE + threadIdx.x] = t[threadIdx.x][threadIdx.y];
}
"""
HALO = """#define W 256
__global__ void diff(const float* f, float* d, int n) {
    __shared__ float s[W + 8];
    int i = blockIdx.x * W + threadIdx.x;
    int si = threadIdx.x + 4;
    s[si] = f[i];
    if (threadIdx.x < 4) { s[si - 4] = f[(i - 4 + n) % n]; s[si + W] = f[(i + W) % n]; }
    __syncthreads();
    d[i] = s[si + 4] - s[si - 4];
}
"""


def test_extra_entries_read_at_a_negative_neighbour_offset_are_a_halo_not_padding():
    assert found("bank_conflict_padding", PADDED)
    assert not found("bank_conflict_padding", HALO)


def test_a_padding_named_as_a_small_constant_is_padding():
    named = """__global__ void k(const float* B, float* out) {
    const int extra = 5;
    __shared__ float Bs[8 * (128 + extra)];
    Bs[threadIdx.y * (128 + extra) + threadIdx.x] = B[threadIdx.y * 128 + threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = Bs[threadIdx.x * (128 + extra)];
}
"""
    assert found("bank_conflict_padding", named)
    # near miss: a second tile (offset 128 * 8), not a padding
    two = named.replace("const int extra = 5;", "const int extra = 128 * 8;")
    assert not found("bank_conflict_padding", two)


ROTATED = """__global__ void k(const float* A, float* out) {
    __shared__ float tile[64][32];
    float acc = 0.f;
    for (int r = threadIdx.y; r < 64; r += blockDim.y) tile[r][threadIdx.x] = A[r * 32 + threadIdx.x];
    __syncthreads();
    int start = 4 * (16 * threadIdx.y + threadIdx.x);
    for (int c = start; c < start + 32; c += 4) acc += tile[threadIdx.x][c % 32];
    out[threadIdx.y * 32 + threadIdx.x] = acc;
}
"""


def test_a_per_thread_rotated_start_column_is_a_bank_conflict_free_layout():
    assert found("bank_conflict_padding", ROTATED)
    # near miss: every thread walks the row from column 0
    assert not found("bank_conflict_padding", ROTATED.replace("int start = 4 * (16 * threadIdx.y + threadIdx.x);", "int start = 0;"))


# -------------------------------------------------------------------------------------------- smem_tiling
def test_a_tile_read_into_registers_through_a_helper_taking_its_address_is_tiling():
    src = """__device__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__global__ void k(const float* B, float* out, int n) {
    __shared__ float Bs[64][32];
    for (int r = threadIdx.y; r < 64; r += blockDim.y) Bs[r][threadIdx.x] = B[r * n + threadIdx.x];
    __syncthreads();
    float4 regs[8];
    for (int u = 0; u < 8; ++u) regs[u] = ld4(&Bs[u + 8 * threadIdx.y][0]);
    float s = 0.f;
    for (int u = 0; u < 8; ++u) s += regs[u].x + regs[u].w;
    out[threadIdx.y * 32 + threadIdx.x] = s;
}
"""
    assert found("smem_tiling", src)
    # near miss: each thread reads back only what it stored itself
    own = src.replace("regs[u] = ld4(&Bs[u + 8 * threadIdx.y][0]);", "regs[u] = make_float4(Bs[threadIdx.y][threadIdx.x], 0.f, 0.f, 0.f);")
    assert not found("smem_tiling", own)


SLICES = """__global__ void scores(const float* Q, const float* K, float* S, int d, int bc) {
    extern __shared__ float sram[];
    float* Kj = &sram[0];
    float* Qi = &sram[bc * d];
    for (int x = 0; x < d; x++) {
        Kj[threadIdx.x * d + x] = K[blockIdx.x * bc * d + threadIdx.x * d + x];
        Qi[threadIdx.x * d + x] = Q[blockIdx.x * bc * d + threadIdx.x * d + x];
    }
    __syncthreads();
    for (int y = 0; y < bc; y++) {
        float sum = 0.f;
        for (int x = 0; x < d; x++) sum += Qi[threadIdx.x * d + x] * Kj[y * d + x];
        S[threadIdx.x * bc + y] = sum;
    }
}
"""


def test_a_slice_of_extern_shared_memory_read_by_every_thread_is_tiling():
    assert found("smem_tiling", SLICES)
    # near miss: both slices read back only at the thread's own row
    own = SLICES.replace("Kj[y * d + x]", "Kj[threadIdx.x * d + x]")
    assert not found("smem_tiling", own)


# -------------------------------------------------------------------------- persistent_kernel, rasterization
SCHEDULED = """struct Tiles {
    int block, it, tiles_m, tiles_n;
    __device__ Tiles(int tm, int tn, int b) : block(b), it(0), tiles_m(tm), tiles_n(tn) {}
    __device__ bool next(int& m, int& n) {
        int num = it * 132 + block;
        if (num >= tiles_m * tiles_n) { return false; }
        int group = num / (16 * 8);
        int pos = num % (16 * 8);
        m = 16 * (group / (tiles_n / 8));
        n = 8 * (group % (tiles_n / 8));
        m += pos / 8;
        n += pos % 8;
        ++it;
        return true;
    }
};
__global__ void tiles(float* C, int tm, int tn) {
    Tiles s(tm, tn, blockIdx.x);
    int m, n;
    while (s.next(m, n)) C[(m * tn + n) * blockDim.x + threadIdx.x] = 1.f;
}
"""


def test_a_schedule_object_handing_out_grouped_tiles_is_persistent_and_rasterized():
    assert found("persistent_kernel", SCHEDULED)
    assert found("block_rasterization", SCHEDULED)
    # near miss: one tile per block (next() answers once), tiles in row-major order
    once = SCHEDULED.replace("int num = it * 132 + block;", "int num = block + it * 0; if (it > 0) return false;") \
        .replace("m += pos / 8;", "").replace("n += pos % 8;", "")
    assert not found("persistent_kernel", once)
    assert not found("block_rasterization", once)


STAGED_COPY = """#define T 32
#define R 8
__global__ void copy(float* out, const float* in, int w) {
    __shared__ float tile[T][T];
    int x = blockIdx.x * T + threadIdx.x, y = blockIdx.y * T + threadIdx.y;
    for (int i = 0; i < T; i += R) tile[threadIdx.y + i][threadIdx.x] = in[(y + i) * w + x];
    __syncthreads();
    for (int i = 0; i < T; i += R) out[(y + i) * w + x] = tile[threadIdx.y + i][threadIdx.x];
}
"""


def test_a_tile_read_back_at_the_subscript_its_thread_wrote_is_a_staging_copy_not_tiling():
    assert not found("smem_tiling", STAGED_COPY)
    transposed = STAGED_COPY.replace("= tile[threadIdx.y + i][threadIdx.x];", "= tile[threadIdx.x][threadIdx.y + i];")
    assert found("smem_tiling", transposed)


def test_an_offset_of_zero_is_no_neighbour():
    src = """__global__ void k(const float* in, float* out) {
    __shared__ float s[256];
    s[threadIdx.x + 0] = in[blockIdx.x * 256 + threadIdx.x];
    __syncthreads();
    out[blockIdx.x * 256 + threadIdx.x] = s[threadIdx.x + 0] * 2.f;
}
"""
    assert not found("smem_tiling", src)
    assert found("smem_tiling", src.replace("s[threadIdx.x + 0] * 2.f", "s[threadIdx.x + 1] * 2.f"))


# ---------------------------------------------------------------------------------------- warp_vote_match
def test_an_active_mask_given_to_shuffles_is_no_vote_and_a_ballot_is():
    scan = """__global__ void k(unsigned* x) {
    const unsigned mask = __activemask();
    unsigned v = x[threadIdx.x];
    for (int o = 1; o < 32; o <<= 1) { unsigned t = __shfl_up_sync(mask, v, o); if ((threadIdx.x & 31) >= o) v += t; }
    x[threadIdx.x] = v;
}
"""
    assert not found("warp_vote_match", scan)
    assert found("warp_vote_match", scan.replace("const unsigned mask = __activemask();",
                                                 "const unsigned mask = __ballot_sync(0xffffffffu, x[threadIdx.x] != 0);"))


# --------------------------------------------------------------------------------------- coalesced_access
NAIVE_TRANSPOSE = """__global__ void transpose(float* out, const float* in, int width, int height) {
    int x = blockIdx.x * 32 + threadIdx.x;
    int y = blockIdx.y * 32 + threadIdx.y;
    int index_in = x + width * y;
    int index_out = y + height * x;
    out[index_out] = in[index_in];
}
"""


def test_a_transpose_that_stores_with_the_column_times_a_stride_is_not_coalesced():
    assert not found("coalesced_access", NAIVE_TRANSPOSE)
    assert not found("coalesced_access", NAIVE_TRANSPOSE.replace("out[index_out]", "out[y + height * x]"))
    # near miss: the stride multiplies the row; the column stays the last term of the store
    assert found("coalesced_access", NAIVE_TRANSPOSE.replace("int index_out = y + height * x;", "int index_out = x + height * y;"))


# --------------------------------------------------------------------------------------- grid_stride_loop
def test_a_stride_made_of_the_grid_and_block_sizes_held_in_variables_is_a_grid_stride_loop():
    src = """#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void sum(const float* x, float* out, unsigned n) {
    cg::thread_block cta = cg::this_thread_block();
    unsigned size = cta.size();
    unsigned blocks = gridDim.x;
    unsigned stride = (blocks * size);
    float v = 0.f;
    unsigned i = blockIdx.x * size + threadIdx.x;
    while (i < n) { v += x[i]; i += stride; }
    out[blockIdx.x * size + threadIdx.x] = v;
}
"""
    assert found("grid_stride_loop", src)
    # near miss: the grid's block count times a constant chunk, not the block size
    assert not found("grid_stride_loop", src.replace("unsigned stride = (blocks * size);", "unsigned stride = (blocks * 4);"))


def test_a_halving_loop_is_a_reduction_for_fusion_only_where_it_combines():
    normalize = """__global__ void normalize(const float* x, float* y, int n) {
    __shared__ float s[256];
    float v = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) v += x[blockIdx.x * n + i];
    s[threadIdx.x] = v;
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        __syncthreads();
        if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[blockIdx.x * n + i] = x[blockIdx.x * n + i] / s[0];
}
"""
    assert found("kernel_fusion", normalize)
    assert found("kernel_fusion", normalize.replace("if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];",
                                                    "if (threadIdx.x < stride) { s[threadIdx.x] = fmaxf(s[threadIdx.x], s[threadIdx.x + stride]); }"))
    # near miss: the same loops around a compare-exchange network, then a copy out
    network = normalize.replace("if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];",
                                "unsigned p = 2 * threadIdx.x - (threadIdx.x & (stride - 1)); swap_if(s[p], s[p + stride]);") \
        .replace("x[blockIdx.x * n + i] / s[0]", "s[i]").replace("__global__", "__device__ void swap_if(float& a, float& b) { if (a > b) { float t = a; a = b; b = t; } }\n__global__")
    assert not found("kernel_fusion", network)


LDMATRIX_MMA = """#include <cuda_fp16.h>
__device__ unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ void put(half* base, int i, half v) { base[i] = v; }
__global__ void mma_tile(const half* A, const half* B, float* C) {
    __shared__ __align__(16) half tile[16 * 16];
    half* base = tile;
    for (int i = threadIdx.x; i < 256; i += 32) put(base, i, SOURCE);
    __syncthreads();
    unsigned a0, a1, a2, a3;
    const half* row = base + (threadIdx.x % 16) * 16 + (threadIdx.x / 16) * 8;
    asm volatile("ldmatrix.sync.aligned.x4.m8n8.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(smem_addr(row)));
    unsigned b0 = 0x3c003c00u, b1 = 0x3c003c00u;
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    C[threadIdx.x * 4 + 0] = d0; C[threadIdx.x * 4 + 1] = d1; C[threadIdx.x * 4 + 2] = d2; C[threadIdx.x * 4 + 3] = d3;
}
"""


def test_global_data_stored_to_shared_and_read_by_ldmatrix_into_mma_is_tiling_by_the_build(tmp_path):
    src = LDMATRIX_MMA.replace("SOURCE", "A[blockIdx.x * 256 + i]")
    assert not found("smem_tiling", src)                 # the source rules see no tile being filled
    assert found("smem_tiling", src, built(tmp_path, src))
    # near miss: the tile holds values each thread computes (no global data staged)
    own = LDMATRIX_MMA.replace("SOURCE", "__float2half(float(i))")
    assert not found("smem_tiling", own, built(tmp_path, own))


# --------------------------------------------------------------------- common textbook forms, read by rule
FLIPPED_STAGE = """__global__ void sgemm(const float* A, const float* B, float* C, int K) {
    __shared__ float As[2][8][64];
    __shared__ float Bs[2][8][64];
    float acc = 0.f;
    As[0][threadIdx.y][threadIdx.x] = A[threadIdx.y * K + threadIdx.x];
    Bs[0][threadIdx.y][threadIdx.x] = B[threadIdx.y * 64 + threadIdx.x];
    __syncthreads();
    int write_stage = 1;
    for (int k = 8; k <= K; k += 8) {
        float na = 0.f, nb = 0.f;
        if (k < K) { na = A[threadIdx.y * K + k + threadIdx.x]; nb = B[(k + threadIdx.y) * 64 + threadIdx.x]; }
        int read_stage = write_stage ^ 1;
        for (int j = 0; j < 8; ++j) acc += As[read_stage][j][threadIdx.y] * Bs[read_stage][j][threadIdx.x];
        if (k < K) {
            As[write_stage][threadIdx.y][threadIdx.x] = na;
            Bs[write_stage][threadIdx.y][threadIdx.x] = nb;
            __syncthreads();
            write_stage ^= 1;
        }
    }
    C[threadIdx.y * 64 + threadIdx.x] = acc;
}
"""


def test_a_two_stage_shared_array_indexed_by_a_flipped_stage_variable_is_double_buffering():
    assert found("double_buffering", FLIPPED_STAGE)
    # near miss: the flag flips a choice of global buffers; the shared [2][...] array is two named tiles
    flag = """__global__ void pingpong(float* a, float* b, int steps) {
    __shared__ float t[2][256];
    int flip = 0;
    for (int s = 0; s < steps; ++s) {
        float* src = flip ? b : a;
        float* dst = flip ? a : b;
        t[0][threadIdx.x] = src[threadIdx.x];
        t[1][threadIdx.x] = src[threadIdx.x + 256];
        __syncthreads();
        dst[threadIdx.x] = t[0][255 - threadIdx.x] + t[1][threadIdx.x];
        __syncthreads();
        flip ^= 1;
    }
}
"""
    assert not found("double_buffering", flag)


UNROLLED_TREE = """__global__ void reduce(const float* x, float* out) {
    __shared__ float s[256];
    unsigned t = threadIdx.x;
    s[t] = x[blockIdx.x * 256 + t];
    __syncthreads();
    if (t < 128) { s[t] += s[t + 128]; } __syncthreads();
    if (t < 64) { s[t] += s[t + 64]; } __syncthreads();
    if (t < 32) { volatile float* v = s; v[t] += v[t + 32]; v[t] += v[t + 16]; v[t] += v[t + 8]; v[t] += v[t + 4]; v[t] += v[t + 2]; v[t] += v[t + 1]; }
    if (t == 0) out[blockIdx.x] = s[0];
}
"""


def test_a_halving_tree_written_out_step_by_step_is_a_block_reduction():
    assert found("block_reduction_tree", UNROLLED_TREE)
    # near miss: a scan's steps read t - offset, not t + offset
    scan = UNROLLED_TREE.replace("+ 128]", "- 128]").replace("+ 64]", "- 64]").replace("+ 32]", "- 32]") \
        .replace("+ 16]", "- 16]").replace("+ 8]", "- 8]").replace("+ 4]", "- 4]").replace("+ 2]", "- 2]").replace("+ 1]", "- 1]")
    assert not found("block_reduction_tree", scan)


TWO_LEVEL_HELPERS = """__device__ float warp_sum(float v) { for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o); return v; }
__device__ float block_sum(float v) {
    __shared__ float s[32];
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0) s[threadIdx.x / 32] = v;
    __syncthreads();
    v = threadIdx.x < blockDim.x / 32 ? s[threadIdx.x % 32] : 0.f;
    return warp_sum(v);
}
__global__ void scale_rows(const float* x, float* y, int n) {
    float v = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) v += x[blockIdx.x * n + i];
    __shared__ float total;
    v = block_sum(v);
    if (threadIdx.x == 0) total = v;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[blockIdx.x * n + i] = x[blockIdx.x * n + i] / total;
}
"""


def test_a_reduction_through_a_block_helper_and_an_output_loop_using_it_are_fused():
    assert found("kernel_fusion", TWO_LEVEL_HELPERS)
    # near miss: the block sum is the kernel's only output (one value per block, no output loop)
    only_sum = TWO_LEVEL_HELPERS[:TWO_LEVEL_HELPERS.index("__global__")] + """__global__ void row_sums(const float* x, float* y, int n) {
    float v = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) v += x[blockIdx.x * n + i];
    v = block_sum(v);
    if (threadIdx.x == 0) y[blockIdx.x] = v;
}
"""
    assert not found("kernel_fusion", only_sum)


def test_a_tile_read_as_a_converted_product_operand_is_tiling():
    src = """#include <cuda_fp16.h>
__global__ void k(const half* a, const half* b, half* c, int K) {
    __shared__ half sa[64][16];
    __shared__ half sb[16][64];
    float acc = 0.f;
    for (int t = 0; t < K; t += 16) {
        sa[threadIdx.x % 64][threadIdx.x / 64] = a[(blockIdx.y * 64 + threadIdx.x % 64) * K + t + threadIdx.x / 64];
        sb[threadIdx.x / 64][threadIdx.x % 64] = b[(t + threadIdx.x / 64) * 64 + threadIdx.x % 64];
        __syncthreads();
        for (int kk = 0; kk < 16; ++kk) acc += __half2float(sa[threadIdx.x % 64][kk]) * __half2float(sb[kk][threadIdx.x % 64]);
        __syncthreads();
    }
    c[blockIdx.y * 64 * 64 + threadIdx.x] = __float2half(acc);
}
"""
    assert found("smem_tiling", src)
    # near miss: a thread's own staged element, converted and scaled in a loop over something else
    own = src.replace("acc += __half2float(sa[threadIdx.x % 64][kk]) * __half2float(sb[kk][threadIdx.x % 64]);",
                      "acc += __half2float(sa[threadIdx.x % 64][threadIdx.x / 64]) * 2.f;")
    assert not found("smem_tiling", own)


def test_a_scan_scratch_read_at_the_threads_second_element_is_no_neighbour():
    two_per_thread = """__global__ void scan(float* out, const float* in, int n) {
    extern __shared__ float temp[];
    int t = threadIdx.x;
    temp[2 * t] = in[2 * t];
    temp[2 * t + 1] = in[2 * t + 1];
    for (int d = n >> 1; d > 0; d >>= 1) { __syncthreads(); if (t < d) temp[2 * t + 1] += temp[2 * t]; }
    __syncthreads();
    out[2 * t] = temp[2 * t];
    out[2 * t + 1] = temp[2 * t + 1];
}
"""
    assert not found("smem_tiling", two_per_thread)
    # a neighbour's element of data staged as it is (no scan in between: a scanned scratch is no tile)
    halo = two_per_thread.replace("out[2 * t + 1] = temp[2 * t + 1];", "out[2 * t + 1] = temp[t + 1];")
    assert not found("smem_tiling", halo)
    staged = halo.replace("if (t < d) temp[2 * t + 1] += temp[2 * t];", "")
    assert found("smem_tiling", staged)


def test_a_variable_holding_the_y_index_reads_as_it_and_a_warp_per_y_row_with_lane_columns_is_warp_per_row():
    assert "y[threadIdx.y] = 0" in canonical("int ty = threadIdx.y; y[ty] = 0; ty = 3;")
    sgemv = """__device__ float warp_sum(float v) { for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o); return v; }
__global__ void sgemv(const float* A, const float* x, float* y, int M, int N) {
    int ty = threadIdx.y;
    int lane = threadIdx.x % 32;
    int row = blockDim.y * blockIdx.x + ty;
    if (row >= M) return;
    float s = 0.f;
    for (int i = 0; i < N / 32; i++) { int col = i * 32 + lane; s += A[row * N + col] * x[col]; }
    s = warp_sum(s);
    if (lane == 0) y[row] = s;
}
"""
    assert found("warp_per_row", sgemv)
    # near miss: the y thread is the row, but every x thread reads whole columns (a column per lane)
    cols = sgemv.replace("int col = i * 32 + lane; s += A[row * N + col] * x[col];", "s += A[(i * 32 + row) * N + lane];")
    assert not found("warp_per_row", cols)


def test_one_output_per_thread_made_from_a_reduced_shared_scalar_is_fused():
    src = """__device__ float warp_sum(float v) { for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o); return v; }
__global__ void center(const float* x, float* y, int n) {
    __shared__ float mean;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.f;
    float s = warp_sum(v);
    if (threadIdx.x == 0) mean = s / 32.f;
    __syncthreads();
    if (i < n) y[i] = x[i] - mean;
}
"""
    assert found("kernel_fusion", src)
    # near miss: the reduced scalar is the only output
    assert not found("kernel_fusion", src.replace("if (i < n) y[i] = x[i] - mean;", "if (threadIdx.x == 0) y[blockIdx.x] = mean;"))


def test_the_grid_size_times_a_tile_is_not_the_column_times_a_stride():
    tiled_transpose = """#define T 32
__global__ void transpose(float* out, const float* in) {
    __shared__ float tile[T][T + 1];
    int x = blockIdx.x * T + threadIdx.x;
    int y = blockIdx.y * T + threadIdx.y;
    int width = gridDim.x * T;
    tile[threadIdx.y][threadIdx.x] = in[y * width + x];
    __syncthreads();
    x = blockIdx.y * T + threadIdx.x;
    y = blockIdx.x * T + threadIdx.y;
    out[y * width + x] = tile[threadIdx.x][threadIdx.y];
}
"""
    assert found("coalesced_access", tiled_transpose)
    # near miss: the column really is scaled by a stride (one row per thread)
    assert not found("coalesced_access", tiled_transpose.replace("int width = gridDim.x * T;", "int width = x * T;")
                     .replace("in[y * width + x]", "in[x * width + y]").replace("out[y * width + x]", "out[x * width + y]"))
