"""The ``fused`` dataflow fact (tools/compiler/ptx/fusion.py) on what the real nvcc builds from small kernels
written for it: each form of kernel fusion in docs/features.md, and a near miss for each (skipped without
nvcc)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_detector_rules import built

from cuda_llm.tools.compiler.ptx import FACTS
from cuda_llm.tools.compiler.ptx.dataflow import analyse
from cuda_llm.tools.compiler.ptx.fusion import fusion_facts
from cuda_llm.tools.compiler.ptx.parse import parse_ptx

# ------------------------------------------------------------------- a. statistics and outputs
SOFTMAX_WARP = r"""
__global__ void softmax_rows(const float* x, float* y, int cols) {
    const float* r = x + (size_t)blockIdx.x * cols;
    float m = -INFINITY, s = 0.f;
    for (int c = threadIdx.x; c < cols; c += 32) m = fmaxf(m, r[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    for (int c = threadIdx.x; c < cols; c += 32) s += __expf(r[c] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    for (int c = threadIdx.x; c < cols; c += 32) y[(size_t)blockIdx.x * cols + c] = __expf(r[c] - m) / s;
}
"""

LAYERNORM_SLOT = r"""
__global__ void layernorm(const float* x, const float* g, float* y, int cols) {
    __shared__ float red[256];
    __shared__ float mean;
    const float* r = x + (size_t)blockIdx.x * cols;
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += 256) s += r[c];
    red[threadIdx.x] = s;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) mean = red[0] / cols;        // the statistic put in a slot every thread reads
    __syncthreads();
    for (int c = threadIdx.x; c < cols; c += 256) y[(size_t)blockIdx.x * cols + c] = (r[c] - mean) * g[c];
}
"""

RMSNORM_ROW_IN_SHARED = r"""
__global__ void rmsnorm_smem(const float* x, float* y, int cols) {
    extern __shared__ float row[];
    __shared__ float warp_sums[32];
    float ss = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = x[(size_t)blockIdx.x * cols + c];
        row[c] = v;
        ss += v * v;
    }
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_down_sync(0xffffffff, ss, o);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = ss;
    __syncthreads();
    float t = 0.f;
    for (int w = 0; w < blockDim.x / 32; ++w) t += warp_sums[w];
    float inv = rsqrtf(t / cols + 1e-6f);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) y[(size_t)blockIdx.x * cols + c] = row[c] * inv;
}
"""

PLAIN_REDUCTION = r"""
__global__ void block_sums(const float* x, float* out, int n) {
    __shared__ float red[256];
    int i = blockIdx.x * 256 + threadIdx.x;
    red[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = red[0];
}
"""

WARP_ROW_SUMS_WITH_BIAS = r"""
__global__ void gemv_warp_rows(const float* A, const float* x, const float* bias, float* y, int rows, int cols) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (row >= rows) return;
    float s = 0.f;
    for (int c = lane; c < cols; c += 32) s += A[(size_t)row * cols + c] * x[c];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffff, s, o);
    if (lane == 0) y[row] = s + bias[row];              // one value per warp: a reduction, not outputs from it
}
"""

NORMALIZE_ONLY = r"""
__global__ void normalize(const float* x, const float* mean, const float* rstd, float* y, int cols) {
    int r = blockIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;  // statistics computed by another kernel
    if (c < cols) y[(size_t)r * cols + c] = (x[(size_t)r * cols + c] - mean[r]) * rstd[r];
}
"""

EXCLUSIVE_SCAN = r"""
__global__ void scan_block(const float* x, float* y, int n) {
    __shared__ float s[256];
    int i = blockIdx.x * 256 + threadIdx.x;
    float v = i < n ? x[i] : 0.f;
    s[threadIdx.x] = v;
    __syncthreads();
    for (int off = 1; off < 256; off <<= 1) {
        float t = threadIdx.x >= off ? s[threadIdx.x - off] : 0.f;
        __syncthreads();
        s[threadIdx.x] += t;
        __syncthreads();
    }
    if (i < n) y[i] = s[threadIdx.x] - v;            // prefix sums beside the element: a scan, not statistics
}
"""

# -------------------------------------------------------------------------------- b. epilogues
GEMM = r"""
__global__ void gemm(const float* A, const float* B, const float* bias, float* C, int n, float alpha, float beta) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    float acc = 0.f;
    for (int k = 0; k < n; ++k) acc = fmaf(A[row * n + k], B[k * n + col], acc);
    C[row * n + col] = %s;
}
"""
GEMM_RELU = GEMM % "fmaxf(acc + bias[col], 0.f)"
GEMM_GELU = GEMM % "0.5f * acc * (1.f + tanhf(0.7978845608f * (acc + 0.044715f * acc * acc * acc)))"
GEMM_ALPHA_BETA = GEMM % "alpha * acc + beta * C[row * n + col]"
GEMM_BIAS = GEMM % "acc + bias[col]"

GEMM_ERF_GELU = GEMM % "0.5f * acc * (1.f + erff(acc * 0.70710678f))"

# the same epilogue inside a persistent tile loop: erff's in-place update for large arguments lies in a loop there
# but is carried around none (a running value is)
PERSISTENT_GEMM = r"""
__global__ void gemm_tiles(const float* A, const float* B, const float* bias, float* C, int n, int tiles) {
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int row = (t / (n / 16)) * 16 + threadIdx.y, col = (t %% (n / 16)) * 16 + threadIdx.x;
        float acc = 0.f;
        for (int k = 0; k < n; ++k) acc = fmaf(A[row * n + k], B[k * n + col], acc);
        C[row * n + col] = %s;
    }
}
"""
PERSISTENT_ERF_GELU = PERSISTENT_GEMM % "0.5f * (acc + bias[col]) * (1.f + erff((acc + bias[col]) * 0.70710678f))"
PERSISTENT_BIAS = PERSISTENT_GEMM % "acc + bias[col]"

WMMA = r"""
#include <mma.h>
using namespace nvcuda;
__global__ void wmma_gemm(const half* A, const half* B, float* C, int n) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::fill_fragment(c, 0.f);
    int tm = blockIdx.y * 16, tn = blockIdx.x * 16;
    for (int k = 0; k < n; k += 16) {
        wmma::load_matrix_sync(a, A + tm * n + k, n);
        wmma::load_matrix_sync(b, B + tn * n + k, n);
        wmma::mma_sync(c, a, b, c);
    }
    %s
    wmma::store_matrix_sync(C + tm * n + tn, c, n, wmma::mem_row_major);
}
"""
WMMA_RELU = WMMA % "for (int i = 0; i < c.num_elements; ++i) c.x[i] = fmaxf(c.x[i], 0.f);"
WMMA_PLAIN = WMMA % ""

CUB_SOFTMAX = r"""
#include <cub/block/block_reduce.cuh>
__global__ void softmax_cub(const float* x, float* y, int cols) {
    typedef cub::BlockReduce<float, 256> BR;
    __shared__ typename BR::TempStorage tmp;
    __shared__ float s_max, s_sum;
    const float* r = x + (size_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += 256) m = fmaxf(m, r[c]);
    m = BR(tmp).Reduce(m, ::cuda::maximum<>());
    if (threadIdx.x == 0) s_max = m;
    __syncthreads();
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += 256) s += expf(r[c] - s_max);
    s = BR(tmp).Sum(s);
    if (threadIdx.x == 0) s_sum = s;
    __syncthreads();
    for (int c = threadIdx.x; c < cols; c += 256) y[(size_t)blockIdx.x * cols + c] = expf(r[c] - s_max) / s_sum;
}
"""

CG_RMSNORM = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
__global__ void rms_cg(const float* x, const float* w, float* y, int cols) {
    auto warp = cg::tiled_partition<32>(cg::this_thread_block());
    int row = blockIdx.x * (blockDim.x / 32) + warp.meta_group_rank();
    const float* r = x + (size_t)row * cols;
    float ss = 0.f;
    for (int c = warp.thread_rank(); c < cols; c += 32) ss += r[c] * r[c];
    ss = cg::reduce(warp, ss, cg::plus<float>());
    float inv = rsqrtf(ss / cols + 1e-5f);
    for (int c = warp.thread_rank(); c < cols; c += 32) y[(size_t)row * cols + c] = r[c] * inv * w[c];
}
"""

SHUFFLE_BROADCAST = r"""
__global__ void share_of_warp_sum(const float* x, float* y, int n) {
    int i = blockIdx.x * 32 + threadIdx.x;
    float v = i < n ? x[i] : 0.f, s = v;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffff, s, o);
    s = __shfl_sync(0xffffffff, s, 0);               // lane 0's total to every lane
    if (i < n) y[i] = v / s;
}
"""

SHARED_ATOMIC_SUM = r"""
__global__ void share_of_block_sum(const float* x, float* y, int n) {
    __shared__ float total;
    if (threadIdx.x == 0) total = 0.f;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.f;
    atomicAdd(&total, v);                             // the block's sum by shared atomics
    __syncthreads();
    if (i < n) y[i] = v / total;
}
"""

SHARED_HISTOGRAM = r"""
__global__ void histogram_then_copy(const int* keys, int* counts, float* y, const float* x, int n) {
    __shared__ int bins[256];
    bins[threadIdx.x] = 0;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[keys[i] & 255], 1);
    __syncthreads();
    atomicAdd(&counts[threadIdx.x], bins[threadIdx.x]);
    if (i < n) y[i] = 2.f * x[i];                     // an elementwise copy beside a histogram: nothing combined
}
"""

# ------------------------------------------------------------------------------------ c. phases
GRID_SYNC = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void scale_by_total(const float* x, float* y, float* total, int n) {
    float s = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
    atomicAdd(total, s);
    cg::this_grid().sync();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i] / *total;
}
"""

LAST_BLOCK = r"""
__device__ unsigned int done = 0;
__global__ void sum_last_block(const float* x, float* partial, float* out, int n) {
    __shared__ float red[256];
    __shared__ bool last;
    int i = blockIdx.x * 256 + threadIdx.x;
    red[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = red[0];
        __threadfence();
        last = atomicInc(&done, gridDim.x) == gridDim.x - 1;
    }
    __syncthreads();
    if (last && threadIdx.x == 0) {
        float t = 0.f;
        for (int b = 0; b < gridDim.x; ++b) t += partial[b];
        *out = t;
    }
}
"""

GRID_BARRIER_BY_HAND = r"""
__device__ unsigned int arrived = 0;
__global__ void two_phases(const float* x, float* partial, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.f;
    if (threadIdx.x == 0) partial[blockIdx.x] = v;
    __syncthreads();
    if (threadIdx.x == 0) {                           // every block arrives, then waits for the others
        __threadfence();
        atomicAdd(&arrived, 1u);
        while (%s < gridDim.x) {}
    }
    __syncthreads();
    float t = 0.f;
    for (int b = 0; b < gridDim.x; ++b) t += partial[b];
    if (i < n) y[i] = v / t;
}
"""
GRID_BARRIER_VOLATILE = GRID_BARRIER_BY_HAND % "*(volatile unsigned int*)&arrived"
GRID_BARRIER_ATOMIC_READ = GRID_BARRIER_BY_HAND % "atomicAdd(&arrived, 0u)"

SPIN_LOCK = r"""
__global__ void locked_add(const float* x, float* total, int* lock, int n) {
    __shared__ float red[256];
    int i = blockIdx.x * 256 + threadIdx.x;
    red[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) {                           // a lock around one update: no phase waits for the grid
        while (atomicCAS(lock, 0, 1) != 0) {}
        *total += red[0];
        __threadfence();
        atomicExch(lock, 0);
    }
}
"""

WORK_QUEUE = r"""
__global__ void persistent_rows(const float* x, float* y, unsigned int* next, int rows, int cols) {
    __shared__ unsigned int row;
    if (threadIdx.x == 0) row = atomicAdd(next, 1u);
    __syncthreads();
    while (row < rows) {                              // rows taken from an atomic queue: one phase
        for (int c = threadIdx.x; c < cols; c += blockDim.x) y[row * cols + c] = 2.f * x[row * cols + c];
        __syncthreads();
        if (threadIdx.x == 0) row = atomicAdd(next, 1u);
        __syncthreads();
    }
}
"""

ATOMIC_PARTIALS = r"""
__global__ void sum_atomic(const float* x, float* out, int n) {
    float s = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffff, s, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, s);   // partials added by atomics: one phase
}
"""

# ---------------------------------------------------------------------------- d. flash attention
FLASH_TILES = r"""
#define D 32
#define BK 32
__global__ void flash(const float* Q, const float* K, const float* V, float* O, int S) {
    __shared__ float Ks[BK][D], Vs[BK][D];
    int q = blockIdx.x * blockDim.x + threadIdx.x;
    float qr[D], acc[D], m = -INFINITY, l = 0.f;
    for (int d = 0; d < D; ++d) { qr[d] = Q[q * D + d]; acc[d] = 0.f; }
    for (int k0 = 0; k0 < S; k0 += BK) {
        for (int e = threadIdx.x; e < BK * D; e += blockDim.x) {
            Ks[e / D][e % D] = K[k0 * D + e];
            Vs[e / D][e % D] = V[k0 * D + e];
        }
        __syncthreads();
        for (int j = 0; j < BK; ++j) {
            float s = 0.f;
            for (int d = 0; d < D; ++d) s += qr[d] * Ks[j][d];
            float mn = fmaxf(m, s), corr = __expf(m - mn), p = __expf(s - mn);
            l = l * corr + p;
            for (int d = 0; d < D; ++d) acc[d] = acc[d] * corr + p * Vs[j][d];
            m = mn;
        }
        __syncthreads();
    }
    for (int d = 0; d < D; ++d) O[q * D + d] = acc[d] / l;
}
"""

SCORES_THROUGH_EXP = r"""
#define D 32
__global__ void scores_exp(const float* Q, const float* K, float* P, int S) {
    int q = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.f;
    for (int d = 0; d < D; ++d) s += Q[q * D + d] * K[j * D + d];
    P[q * S + j] = __expf(s);                        // an epilogue (form b), and no second product
}
"""

CASES = {
    # name: (source, forms expected)
    "softmax_warp_shuffles": (SOFTMAX_WARP, 1),
    "layernorm_tree_and_slot": (LAYERNORM_SLOT, 1),
    "rmsnorm_row_in_shared": (RMSNORM_ROW_IN_SHARED, 1),
    "plain_block_reduction": (PLAIN_REDUCTION, 0),
    "warp_row_sums_with_bias": (WARP_ROW_SUMS_WITH_BIAS, 0),
    "normalize_with_given_statistics": (NORMALIZE_ONLY, 0),
    "exclusive_scan": (EXCLUSIVE_SCAN, 0),
    "gemm_relu_epilogue": (GEMM_RELU, 1),
    "gemm_gelu_epilogue": (GEMM_GELU, 1),
    "gemm_alpha_beta": (GEMM_ALPHA_BETA, 0),
    "gemm_bias": (GEMM_BIAS, 0),
    "gemm_erf_gelu_epilogue": (GEMM_ERF_GELU, 1),
    "persistent_gemm_erf_gelu_epilogue": (PERSISTENT_ERF_GELU, 1),
    "persistent_gemm_bias": (PERSISTENT_BIAS, 0),
    "wmma_relu_epilogue": (WMMA_RELU, 1),
    "wmma_plain": (WMMA_PLAIN, 0),
    "cub_block_reduce_softmax": (CUB_SOFTMAX, 1),
    "cg_reduce_rmsnorm": (CG_RMSNORM, 1),
    "warp_total_broadcast_by_shuffle": (SHUFFLE_BROADCAST, 1),
    "block_sum_by_shared_atomics": (SHARED_ATOMIC_SUM, 1),
    "shared_histogram_beside_a_copy": (SHARED_HISTOGRAM, 0),
    "grid_sync": (GRID_SYNC, 1),
    "last_block_finish": (LAST_BLOCK, 1),
    "grid_barrier_volatile_spin": (GRID_BARRIER_VOLATILE, 1),
    "grid_barrier_atomic_spin": (GRID_BARRIER_ATOMIC_READ, 1),
    "atomic_partials": (ATOMIC_PARTIALS, 0),
    "spin_lock_around_an_update": (SPIN_LOCK, 0),
    "atomic_work_queue": (WORK_QUEUE, 0),
    "flash_attention_tiles": (FLASH_TILES, 1),
    "scores_through_exp_stored": (SCORES_THROUGH_EXP, 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_on_real_builds(tmp_path: Path, name: str):
    source, forms = CASES[name]
    _, sass = built(tmp_path, source)
    assert sass.flow["fused"] == forms, (name, sass.flow)


def test_fused_is_a_named_fact():
    assert "fused" in FACTS


def _ptx(tmp_path: Path, source: str) -> str:
    import subprocess

    built(tmp_path, source)               # skips without nvcc
    from cuda_llm.tools.compiler.compile import nvcc_path

    (tmp_path / "f.cu").write_text(source)
    subprocess.run([nvcc_path(), "-arch=sm_90", "-ptx", "-o", str(tmp_path / "f.ptx"), str(tmp_path / "f.cu")],
                   check=True, capture_output=True)
    return (tmp_path / "f.ptx").read_text()


def test_the_forms_are_read_apart_and_fast(tmp_path: Path):
    """Flash attention is form d (its exponentials summed into the output are no epilogue); the scores
    stored through exp are form b only; each kernel's analysis takes well under a second."""
    from cuda_llm.tools.compiler.ptx import fusion as pf
    from cuda_llm.tools.compiler.ptx.affine import Affine

    for source, want in ((FLASH_TILES, (False, False, False, True)), (SCORES_THROUGH_EXP, (False, True, False, False)),
                         (LAST_BLOCK, (False, False, True, False))):
        mod = parse_ptx(_ptx(tmp_path, source))
        [k] = mod.kernels
        start = time.perf_counter()
        flow = analyse(k, mod.shared)
        poly = Affine(flow)
        uses = pf._uses(flow)
        fma, mma = pf._accumulators(flow)
        got = (pf.statistics_and_outputs(flow, poly), pf.epilogue(flow, fma | mma, uses), pf.grid_phases(flow, poly),
               pf.attention(flow, fma, mma, uses))
        assert got == want, (k.name, got)
        assert fusion_facts(flow, poly)["fused"] == sum(want)
        assert time.perf_counter() - start < 1.0


# ---------------------------------------------------------------------------------- online softmax
ONLINE_REGISTERS = r"""
__global__ void online_rows(const float* x, float* stats, int cols) {
    const float* r = x + (size_t)blockIdx.x * cols;
    float m = -INFINITY, l = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = r[c], mn = fmaxf(m, v);
        l = l * __expf(m - mn) + __expf(v - mn);
        m = mn;
    }
    stats[2 * (blockIdx.x * blockDim.x + threadIdx.x)] = m;
    stats[2 * (blockIdx.x * blockDim.x + threadIdx.x) + 1] = l;
}
"""

ONLINE_COMPARED = r"""
__global__ void online_compare(const float* x, float* stats, int cols) {
    const float* r = x + (size_t)blockIdx.x * cols;
    float m = -INFINITY, l = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = r[c];
        if (v > m) { l *= expf(m - v); m = v; }        // the maximum kept by a comparison
        l += expf(v - m);
    }
    stats[blockIdx.x * blockDim.x + threadIdx.x] = l;
}
"""

ONLINE_THROUGH_MEMORY = r"""
__global__ void tiles_rescale(const float* s, float* m, float* l, int tiles, int w) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    for (int t = 0; t < tiles; ++t) {                  // the running state kept in global memory between tiles
        float mt = -INFINITY, lt = 0.f;
        for (int j = 0; j < w; ++j) mt = fmaxf(mt, s[(row * tiles + t) * w + j]);
        for (int j = 0; j < w; ++j) lt += __expf(s[(row * tiles + t) * w + j] - mt);
        float mp = m[row], mn = fmaxf(mp, mt);
        l[row] = l[row] * __expf(mp - mn) + lt * __expf(mt - mn);
        m[row] = mn;
    }
}
"""

ONLINE_THROUGH_GLOBAL_AND_SHARED = r"""
__global__ void tiles_rescale_staged(const float* s, float* m, float* l, int tiles, int w) {
    __shared__ float sm[32], sl[32];
    int r = threadIdx.x, row = blockIdx.x * 32 + r;
    for (int t = 0; t < tiles; ++t) {                  // the running state copied to shared memory each tile
        sm[r] = m[row];
        sl[r] = l[row];
        __syncthreads();
        float mt = -INFINITY, lt = 0.f;
        for (int j = 0; j < w; ++j) mt = fmaxf(mt, s[(row * tiles + t) * w + j]);
        for (int j = 0; j < w; ++j) lt += __expf(s[(row * tiles + t) * w + j] - mt);
        float mn = fmaxf(sm[r], mt);
        l[row] = sl[r] * __expf(sm[r] - mn) + lt * __expf(mt - mn);
        m[row] = mn;
        __syncthreads();
    }
}
"""

TWO_PASS = r"""
__global__ void two_pass(const float* x, float* y, int cols) {
    const float* r = x + (size_t)blockIdx.x * cols;
    float m = -INFINITY, l = 0.f;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, r[c]);
    for (int c = 0; c < cols; ++c) l += __expf(r[c] - m);   // the maximum known first: nothing rescaled
    for (int c = 0; c < cols; ++c) y[(size_t)blockIdx.x * cols + c] = __expf(r[c] - m) / l;
}
"""

DECAY = r"""
__global__ void decay(const float* x, const float* t, float* y, int n) {
    float s = 0.f, tp = t[0];
    for (int i = 1; i < n; ++i) {                     // a running value scaled by exp of a difference of times
        s = s * __expf(tp - t[i]) + x[i];
        tp = t[i];
    }
    y[blockIdx.x] = s;
}
"""


@pytest.mark.parametrize("source, rescales", [
    (ONLINE_REGISTERS, True), (ONLINE_COMPARED, True), (ONLINE_THROUGH_MEMORY, True),
    (ONLINE_THROUGH_GLOBAL_AND_SHARED, True), (FLASH_TILES, True),
    (TWO_PASS, False), (SOFTMAX_WARP, False), (DECAY, False)],
    ids=["running_max_in_registers", "running_max_by_comparison", "running_state_in_memory",
         "running_state_through_global_and_shared", "flash_attention",
         "two_pass_softmax", "warp_softmax_two_passes", "decay_by_time_difference"])
def test_online_rescale(tmp_path: Path, source: str, rescales: bool):
    _, sass = built(tmp_path, source)
    assert (sass.flow["online_rescale"] > 0) == rescales, sass.flow
