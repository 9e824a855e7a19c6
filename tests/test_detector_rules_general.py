"""Probe kernels in the common styles of real code (textbook SGEMM steps, a padded transpose, a 2-D
convolution with a halo tile, cp.async and register-prefetch double-buffered GEMMs, a fused bias + GELU GEMM
epilogue, a layernorm that normalizes in the same kernel), each labelled from the definitions in
docs/features.md before any detector ran on it. The tiling, register-blocking, double-buffering, fusion and
padding detectors must find exactly the labelled features, from the source alone and with the real build
(skipped without nvcc)."""

from __future__ import annotations


import pytest

from cuda_llm.feature_db import detect_features, load_catalogue
from test_detector_rules import built, found

OWNED = ("smem_tiling", "register_blocking", "double_buffering", "kernel_fusion", "bank_conflict_padding")
CATALOGUE = [f for f in load_catalogue() if f.id in OWNED]

# SGEMM step 2: 1-D shared tiles, the operand pointers advanced by the tile, one output per thread.
SGEMM_SHARED = """
template <const int BLOCKSIZE>
__global__ void sgemm_shared_mem_block(int M, int N, int K, float alpha, const float *A,
                                       const float *B, float beta, float *C) {
  const uint cRow = blockIdx.x;
  const uint cCol = blockIdx.y;
  __shared__ float As[BLOCKSIZE * BLOCKSIZE];
  __shared__ float Bs[BLOCKSIZE * BLOCKSIZE];
  const uint threadCol = threadIdx.x % BLOCKSIZE;
  const uint threadRow = threadIdx.x / BLOCKSIZE;
  A += cRow * BLOCKSIZE * K;
  B += cCol * BLOCKSIZE;
  C += cRow * BLOCKSIZE * N + cCol * BLOCKSIZE;
  float tmp = 0.0;
  for (int bkIdx = 0; bkIdx < K; bkIdx += BLOCKSIZE) {
    As[threadRow * BLOCKSIZE + threadCol] = A[threadRow * K + threadCol];
    Bs[threadRow * BLOCKSIZE + threadCol] = B[threadRow * N + threadCol];
    __syncthreads();
    A += BLOCKSIZE;
    B += BLOCKSIZE * N;
    for (int dotIdx = 0; dotIdx < BLOCKSIZE; ++dotIdx) {
      tmp += As[threadRow * BLOCKSIZE + dotIdx] * Bs[dotIdx * BLOCKSIZE + threadCol];
    }
    __syncthreads();
  }
  C[threadRow * N + threadCol] = alpha * tmp + beta * C[threadRow * N + threadCol];
}
template __global__ void sgemm_shared_mem_block<32>(int, int, int, float, const float *, const float *, float, float *);
"""

# SGEMM step 4: 2-D block tiling, each thread a TM x TN tile of results from register caches of A and B.
SGEMM_2D_BLOCKTILING = """
#define CEIL_DIV(M, N) (((M) + (N)-1) / (N))
template <const int BM, const int BN, const int BK, const int TM, const int TN>
__global__ void __launch_bounds__((BM * BN) / (TM * TN), 1)
    sgemm2DBlocktiling(int M, int N, int K, float alpha, const float *A, const float *B, float beta, float *C) {
  const uint cRow = blockIdx.y;
  const uint cCol = blockIdx.x;
  const uint totalResultsBlocktile = BM * BN;
  const uint numThreadsBlocktile = totalResultsBlocktile / (TM * TN);
  const int threadCol = threadIdx.x % (BN / TN);
  const int threadRow = threadIdx.x / (BN / TN);
  __shared__ float As[BM * BK];
  __shared__ float Bs[BK * BN];
  A += cRow * BM * K;
  B += cCol * BN;
  C += cRow * BM * N + cCol * BN;
  const uint innerRowA = threadIdx.x / BK;
  const uint innerColA = threadIdx.x % BK;
  const uint strideA = numThreadsBlocktile / BK;
  const uint innerRowB = threadIdx.x / BN;
  const uint innerColB = threadIdx.x % BN;
  const uint strideB = numThreadsBlocktile / BN;
  float threadResults[TM * TN] = {0.0};
  float regM[TM] = {0.0};
  float regN[TN] = {0.0};
  for (uint bkIdx = 0; bkIdx < K; bkIdx += BK) {
    for (uint loadOffset = 0; loadOffset < BM; loadOffset += strideA) {
      As[(innerRowA + loadOffset) * BK + innerColA] = A[(innerRowA + loadOffset) * K + innerColA];
    }
    for (uint loadOffset = 0; loadOffset < BK; loadOffset += strideB) {
      Bs[(innerRowB + loadOffset) * BN + innerColB] = B[(innerRowB + loadOffset) * N + innerColB];
    }
    __syncthreads();
    A += BK;
    B += BK * N;
    for (uint dotIdx = 0; dotIdx < BK; ++dotIdx) {
      for (uint i = 0; i < TM; ++i) regM[i] = As[(threadRow * TM + i) * BK + dotIdx];
      for (uint i = 0; i < TN; ++i) regN[i] = Bs[dotIdx * BN + threadCol * TN + i];
      for (uint resIdxM = 0; resIdxM < TM; ++resIdxM)
        for (uint resIdxN = 0; resIdxN < TN; ++resIdxN)
          threadResults[resIdxM * TN + resIdxN] += regM[resIdxM] * regN[resIdxN];
    }
    __syncthreads();
  }
  for (uint resIdxM = 0; resIdxM < TM; ++resIdxM)
    for (uint resIdxN = 0; resIdxN < TN; ++resIdxN)
      C[(threadRow * TM + resIdxM) * N + threadCol * TN + resIdxN] =
          alpha * threadResults[resIdxM * TN + resIdxN] + beta * C[(threadRow * TM + resIdxM) * N + threadCol * TN + resIdxN];
}
template __global__ void sgemm2DBlocktiling<128, 128, 8, 8, 8>(int, int, int, float, const float *, const float *, float, float *);
"""

# The padded transpose: a 32 x 33 tile, rows loaded in passes of 8, written out transposed.
TRANSPOSE_PADDED = """
const int TILE_DIM = 32;
const int BLOCK_ROWS = 8;
__global__ void transposeNoBankConflicts(float *odata, const float *idata) {
  __shared__ float tile[TILE_DIM][TILE_DIM + 1];
  int x = blockIdx.x * TILE_DIM + threadIdx.x;
  int y = blockIdx.y * TILE_DIM + threadIdx.y;
  int width = gridDim.x * TILE_DIM;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
    tile[threadIdx.y + j][threadIdx.x] = idata[(y + j) * width + x];
  __syncthreads();
  x = blockIdx.y * TILE_DIM + threadIdx.x;
  y = blockIdx.x * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
    odata[(y + j) * width + x] = tile[threadIdx.x][threadIdx.y + j];
}
"""

# A 2-D convolution: an input tile with a halo of R on each side loaded cooperatively, the mask in constant
# memory, each thread one output from its neighbourhood in the tile.
CONV2D_HALO = """
#define MASK_RADIUS 2
#define MASK_DIM (2 * MASK_RADIUS + 1)
#define OUT_TILE 16
#define IN_TILE (OUT_TILE + 2 * MASK_RADIUS)
__constant__ float mask[MASK_DIM * MASK_DIM];
__global__ void conv2d_tiled(const float* __restrict__ in, float* __restrict__ out, int width, int height) {
    __shared__ float patch[IN_TILE][IN_TILE];
    const int col0 = blockIdx.x * OUT_TILE - MASK_RADIUS;
    const int row0 = blockIdx.y * OUT_TILE - MASK_RADIUS;
    for (int idx = threadIdx.y * blockDim.x + threadIdx.x; idx < IN_TILE * IN_TILE; idx += blockDim.x * blockDim.y) {
        int r = idx / IN_TILE, c = idx % IN_TILE;
        int gr = row0 + r, gc = col0 + c;
        patch[r][c] = (gr >= 0 && gr < height && gc >= 0 && gc < width) ? in[gr * width + gc] : 0.0f;
    }
    __syncthreads();
    const int orow = blockIdx.y * OUT_TILE + threadIdx.y;
    const int ocol = blockIdx.x * OUT_TILE + threadIdx.x;
    if (orow < height && ocol < width) {
        float sum = 0.0f;
        for (int i = 0; i < MASK_DIM; ++i)
            for (int j = 0; j < MASK_DIM; ++j)
                sum += mask[i * MASK_DIM + j] * patch[threadIdx.y + i][threadIdx.x + j];
        out[orow * width + ocol] = sum;
    }
}
"""

# A cp.async GEMM with two shared stages: the next tile's copies are issued before the current tile is used,
# and the wait leaves one group in flight.
CP_ASYNC_DOUBLE_BUFFER = """
#include <cuda_pipeline.h>
#define BS 32
__global__ void gemm_cp_async_2stage(const float* A, const float* B, float* C, int n) {
    __shared__ float As[2][BS][BS];
    __shared__ float Bs[2][BS][BS];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * BS + ty, col = blockIdx.x * BS + tx;
    const int ntiles = n / BS;
    float acc = 0.f;
    __pipeline_memcpy_async(&As[0][ty][tx], &A[row * n + tx], sizeof(float));
    __pipeline_memcpy_async(&Bs[0][ty][tx], &B[ty * n + col], sizeof(float));
    __pipeline_commit();
    for (int t = 0; t < ntiles; ++t) {
        const int cur = t & 1;
        if (t + 1 < ntiles) {
            const int nxt = (t + 1) & 1;
            __pipeline_memcpy_async(&As[nxt][ty][tx], &A[row * n + (t + 1) * BS + tx], sizeof(float));
            __pipeline_memcpy_async(&Bs[nxt][ty][tx], &B[((t + 1) * BS + ty) * n + col], sizeof(float));
        }
        __pipeline_commit();
        __pipeline_wait_prior(1);
        __syncthreads();
        for (int k = 0; k < BS; ++k) acc += As[cur][ty][k] * Bs[cur][k][tx];
        __syncthreads();
    }
    C[row * n + col] = acc;
}
"""

# A register-prefetch double buffer: the next tile is loaded from global into registers while the current
# shared stage is used, then stored into the other stage (no async copies).
PREFETCH_DOUBLE_BUFFER = """
#define TS 16
__global__ void gemm_prefetch(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int n) {
    __shared__ float sA[2][TS][TS];
    __shared__ float sB[2][TS][TS];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TS + ty, col = blockIdx.x * TS + tx;
    sA[0][ty][tx] = A[row * n + tx];
    sB[0][ty][tx] = B[ty * n + col];
    __syncthreads();
    float acc = 0.f;
    int write_stage = 1;
    for (int t = TS; t <= n; t += TS) {
        float a_next = 0.f, b_next = 0.f;
        if (t < n) {
            a_next = A[row * n + t + tx];
            b_next = B[(t + ty) * n + col];
        }
        int read_stage = write_stage ^ 1;
        #pragma unroll
        for (int k = 0; k < TS; ++k) acc += sA[read_stage][ty][k] * sB[read_stage][k][tx];
        if (t < n) {
            sA[write_stage][ty][tx] = a_next;
            sB[write_stage][ty][tx] = b_next;
        }
        __syncthreads();
        write_stage ^= 1;
    }
    C[row * n + col] = acc;
}
"""

# A tiled GEMM whose epilogue adds a bias and applies GELU before the one store.
GEMM_BIAS_GELU = """
#define T 16
__device__ __forceinline__ float gelu_tanh(float x) {
    const float k0 = 0.7978845608f, k1 = 0.044715f;
    return 0.5f * x * (1.f + tanhf(k0 * (x + k1 * x * x * x)));
}
__global__ void linear_bias_gelu(const float* X, const float* W, const float* bias, float* Y, int M, int N, int K) {
    __shared__ float xs[T][T];
    __shared__ float ws[T][T];
    int r = blockIdx.y * T + threadIdx.y;
    int c = blockIdx.x * T + threadIdx.x;
    float dot = 0.f;
    for (int k0 = 0; k0 < K; k0 += T) {
        xs[threadIdx.y][threadIdx.x] = (r < M && k0 + threadIdx.x < K) ? X[r * K + k0 + threadIdx.x] : 0.f;
        ws[threadIdx.y][threadIdx.x] = (c < N && k0 + threadIdx.y < K) ? W[c * K + k0 + threadIdx.y] : 0.f;
        __syncthreads();
        for (int kk = 0; kk < T; ++kk) dot += xs[threadIdx.y][kk] * ws[kk][threadIdx.x];
        __syncthreads();
    }
    if (r < M && c < N) Y[r * N + c] = gelu_tanh(dot + bias[c]);
}
"""

# A layernorm: one block a row, the mean and variance reduced across the block (shuffles, then warp sums in
# shared memory), then the same kernel normalizes the row with gamma and beta.
LAYERNORM = """
__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}
__device__ float block_sum(float v, float* scratch) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) scratch[wid] = v;
    __syncthreads();
    v = (threadIdx.x < blockDim.x / 32) ? scratch[lane] : 0.f;
    if (wid == 0) v = warp_sum(v);
    if (threadIdx.x == 0) scratch[0] = v;
    __syncthreads();
    float r = scratch[0];
    __syncthreads();
    return r;
}
__global__ void layernorm_fwd(const float* __restrict__ x, const float* __restrict__ gamma,
                              const float* __restrict__ beta, float* __restrict__ y, int cols, float eps) {
    __shared__ float scratch[32];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    float s = 0.f, ss = 0.f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) { float v = xr[i]; s += v; ss += v * v; }
    s = block_sum(s, scratch);
    ss = block_sum(ss, scratch);
    float mean = s / cols;
    float rstd = rsqrtf(ss / cols - mean * mean + eps);
    for (int i = threadIdx.x; i < cols; i += blockDim.x)
        yr[i] = (xr[i] - mean) * rstd * gamma[i] + beta[i];
}
"""

# Near misses. A block sum that only writes the sum (a reduction scratch, no epilogue, no tile).
BLOCK_SUM_ONLY = """
__global__ void block_sum(const float* in, float* out, int n) {
    __shared__ float sdata[256];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? in[i] : 0.f;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}
"""

# A naive GEMM with a bias add (no nonlinearity: no epilogue fusion by the definition), one output per thread,
# no shared memory; the local array holds coordinates, not accumulators.
NAIVE_GEMM_BIAS = """
__global__ void naive_gemm_bias(const float* A, const float* B, const float* bias, float* C, int M, int N, int K) {
    int rc[2] = {(int)(blockIdx.y * blockDim.y + threadIdx.y), (int)(blockIdx.x * blockDim.x + threadIdx.x)};
    if (rc[0] >= M || rc[1] >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[rc[0] * K + k] * B[k * N + rc[1]];
    C[rc[0] * N + rc[1]] = acc + bias[rc[1]];
}
"""

PROBES = {
    "sgemm_shared": (SGEMM_SHARED, {"smem_tiling"}),
    "sgemm_2d_blocktiling": (SGEMM_2D_BLOCKTILING, {"smem_tiling", "register_blocking"}),
    "transpose_padded": (TRANSPOSE_PADDED, {"smem_tiling", "bank_conflict_padding"}),
    "conv2d_halo": (CONV2D_HALO, {"smem_tiling"}),
    "cp_async_double_buffer": (CP_ASYNC_DOUBLE_BUFFER, {"smem_tiling", "double_buffering"}),
    "prefetch_double_buffer": (PREFETCH_DOUBLE_BUFFER, {"smem_tiling", "double_buffering"}),
    "gemm_bias_gelu": (GEMM_BIAS_GELU, {"smem_tiling", "kernel_fusion"}),
    "layernorm": (LAYERNORM, {"kernel_fusion"}),
    "block_sum_only": (BLOCK_SUM_ONLY, set()),
    "naive_gemm_bias": (NAIVE_GEMM_BIAS, set()),
}

# SGEMM step 3: 1-D block tiling, each thread a column of TM results, one B value feeding TM FMAs.
SGEMM_1D_BLOCKTILING = """
template <const int BM, const int BN, const int BK, const int TM>
__global__ void sgemm1DBlocktiling(int M, int N, int K, float alpha, const float *A, const float *B, float beta, float *C) {
  const uint cRow = blockIdx.y, cCol = blockIdx.x;
  const int threadCol = threadIdx.x % BN;
  const int threadRow = threadIdx.x / BN;
  __shared__ float As[BM * BK];
  __shared__ float Bs[BK * BN];
  A += cRow * BM * K;
  B += cCol * BN;
  C += cRow * BM * N + cCol * BN;
  const uint innerColA = threadIdx.x % BK, innerRowA = threadIdx.x / BK;
  const uint innerColB = threadIdx.x % BN, innerRowB = threadIdx.x / BN;
  float threadResults[TM] = {0.0};
  for (uint bkIdx = 0; bkIdx < K; bkIdx += BK) {
    As[innerRowA * BK + innerColA] = A[innerRowA * K + innerColA];
    Bs[innerRowB * BN + innerColB] = B[innerRowB * N + innerColB];
    __syncthreads();
    A += BK;
    B += BK * N;
    for (uint dotIdx = 0; dotIdx < BK; ++dotIdx) {
      float tmpB = Bs[dotIdx * BN + threadCol];
      for (uint resIdx = 0; resIdx < TM; ++resIdx)
        threadResults[resIdx] += As[(threadRow * TM + resIdx) * BK + dotIdx] * tmpB;
    }
    __syncthreads();
  }
  for (uint resIdx = 0; resIdx < TM; ++resIdx)
    C[(threadRow * TM + resIdx) * N + threadCol] = alpha * threadResults[resIdx] + beta * C[(threadRow * TM + resIdx) * N + threadCol];
}
template __global__ void sgemm1DBlocktiling<64, 64, 8, 8>(int, int, int, float, const float *, const float *, float, float *);
"""

# All-pairs n-body: each tile of bodies staged in shared memory and read by every thread of the block.
NBODY_TILED = """
#define BLOCK 256
__global__ void body_force(const float4* __restrict__ p, float3* __restrict__ acc_out, int n, float soft) {
    __shared__ float4 sh[BLOCK];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 me = i < n ? p[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    float ax = 0.f, ay = 0.f, az = 0.f;
    for (int tile = 0; tile < gridDim.x; ++tile) {
        int j = tile * BLOCK + threadIdx.x;
        sh[threadIdx.x] = j < n ? p[j] : make_float4(0.f, 0.f, 0.f, 0.f);
        __syncthreads();
        for (int k = 0; k < BLOCK; ++k) {
            float dx = sh[k].x - me.x, dy = sh[k].y - me.y, dz = sh[k].z - me.z;
            float d2 = dx * dx + dy * dy + dz * dz + soft;
            float inv = rsqrtf(d2);
            float s = sh[k].w * inv * inv * inv;
            ax += dx * s; ay += dy * s; az += dz * s;
        }
        __syncthreads();
    }
    if (i < n) acc_out[i] = make_float3(ax, ay, az);
}
"""

# A 1-D stencil: the block's elements and a halo of RADIUS each side in shared memory, each output summed
# over its neighbours' slots.
STENCIL_1D = """
#define RADIUS 3
#define BLOCK_SIZE 256
__global__ void stencil_1d(const int *in, int *out, int n) {
    __shared__ int temp[BLOCK_SIZE + 2 * RADIUS];
    int gindex = threadIdx.x + blockIdx.x * blockDim.x;
    int lindex = threadIdx.x + RADIUS;
    temp[lindex] = gindex < n ? in[gindex] : 0;
    if (threadIdx.x < RADIUS) {
        temp[lindex - RADIUS] = gindex >= RADIUS ? in[gindex - RADIUS] : 0;
        temp[lindex + BLOCK_SIZE] = gindex + BLOCK_SIZE < n ? in[gindex + BLOCK_SIZE] : 0;
    }
    __syncthreads();
    int result = 0;
    for (int offset = -RADIUS; offset <= RADIUS; offset++) result += temp[lindex + offset];
    if (gindex < n) out[gindex] = result;
}
"""

# A three-stage cp.async GEMM in inline PTX: the copies of tile t + 2 are issued before tile t is used and
# the wait leaves the newer groups in flight.
CP_ASYNC_THREE_STAGE_ASM = """
#define BS 32
#define STAGES 3
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\\n" :: "r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\\n" :: "n"(N)); }
__global__ void gemm_3stage(const float* A, const float* B, float* C, int n) {
    __shared__ float As[STAGES][BS][BS];
    __shared__ float Bs[STAGES][BS][BS];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * BS + ty, col = blockIdx.x * BS + tx;
    int ntiles = n / BS;
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ntiles) {
            cp_async4(&As[s][ty][tx], &A[row * n + s * BS + tx]);
            cp_async4(&Bs[s][ty][tx], &B[(s * BS + ty) * n + col]);
        }
        cp_async_commit();
    }
    float acc = 0.f;
    for (int t = 0; t < ntiles; ++t) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        int f = t + STAGES - 1;
        if (f < ntiles) {
            cp_async4(&As[f % STAGES][ty][tx], &A[row * n + f * BS + tx]);
            cp_async4(&Bs[f % STAGES][ty][tx], &B[(f * BS + ty) * n + col]);
        }
        cp_async_commit();
        const int s = t % STAGES;
        for (int k = 0; k < BS; ++k) acc += As[s][ty][k] * Bs[s][k][tx];
    }
    C[row * n + col] = acc;
}
"""

# A row softmax: the row's max and sum reduced across the block in shared memory, then the same kernel
# writes every normalized element.
SOFTMAX_BLOCK = """
__global__ void softmax_rows(const float* x, float* y, int cols) {
    extern __shared__ float red[];
    const float* row = x + blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float sum = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += __expf(row[c] - m);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    sum = red[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) y[blockIdx.x * cols + c] = __expf(row[c] - m) / sum;
}
"""

# A tiled GEMM whose tiles use an XOR swizzle of the column by the row's low bits (no padding), stored through
# a ReLU epilogue.
GEMM_SWIZZLE_RELU = """
#define TILE 32
__global__ void gemm_swizzle_relu(const float* A, const float* B, float* C, int n) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int ty = threadIdx.y, tx = threadIdx.x;
    int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.f;
    for (int t = 0; t < n; t += TILE) {
        As[ty][tx ^ (ty & 7)] = A[row * n + t + tx];
        Bs[ty][tx] = B[(t + ty) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[ty][k ^ (ty & 7)] * Bs[k][tx];
        __syncthreads();
    }
    C[row * n + col] = fmaxf(acc, 0.f);
}
"""

# Near miss: a bitonic sort of a block's keys in shared memory (a sorting-network scratch; the i ^ j partner
# is no swizzle).
BITONIC_SHARED = """
__global__ void bitonic_block(float* keys) {
    __shared__ float s[1024];
    unsigned t = threadIdx.x;
    s[t] = keys[blockIdx.x * 1024 + t];
    __syncthreads();
    for (unsigned k = 2; k <= 1024; k <<= 1) {
        for (unsigned j = k >> 1; j > 0; j >>= 1) {
            unsigned ixj = t ^ j;
            if (ixj > t) {
                bool up = (t & k) == 0;
                float a = s[t], b = s[ixj];
                if ((a > b) == up) { s[t] = b; s[ixj] = a; }
            }
            __syncthreads();
        }
    }
    keys[blockIdx.x * 1024 + t] = s[t];
}
"""

# Near miss: an elementwise kernel that handles four elements per thread through a local index array (no
# products accumulated: no register blocking) and stores the sum (no epilogue).
ELEMENTWISE_FOUR = """
__global__ void add4(const float* a, const float* b, float* c, int n) {
    int idx[4];
    int base = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    for (int i = 0; i < 4; ++i) idx[i] = base + i;
    for (int i = 0; i < 4; ++i)
        if (idx[i] < n) c[idx[i]] = a[idx[i]] + b[idx[i]];
}
"""

PROBES.update({
    "sgemm_1d_blocktiling": (SGEMM_1D_BLOCKTILING, {"smem_tiling", "register_blocking"}),
    "nbody_tiled": (NBODY_TILED, {"smem_tiling"}),
    "stencil_1d": (STENCIL_1D, {"smem_tiling"}),
    "cp_async_three_stage_asm": (CP_ASYNC_THREE_STAGE_ASM, {"smem_tiling", "double_buffering"}),
    "softmax_block": (SOFTMAX_BLOCK, {"kernel_fusion"}),
    "gemm_swizzle_relu": (GEMM_SWIZZLE_RELU, {"smem_tiling", "bank_conflict_padding", "kernel_fusion"}),
    "bitonic_shared": (BITONIC_SHARED, set()),
    "elementwise_four": (ELEMENTWISE_FOUR, set()),
})

# Two named shared tiles swapped by pointer each step: the copies into the next tile are issued before the
# current tile is used, and the wait leaves the newest group in flight.
POINTER_SWAP_DOUBLE_BUFFER = """
#include <cuda_pipeline.h>
#define TILE 256
__global__ void weighted_sum_pingpong(const float* __restrict__ x, const float* __restrict__ w, float* out, int tiles) {
    __shared__ float buf0[TILE];
    __shared__ float buf1[TILE];
    float* cur = buf0;
    float* nxt = buf1;
    __pipeline_memcpy_async(&cur[threadIdx.x], &x[threadIdx.x], sizeof(float));
    __pipeline_commit();
    float acc = 0.f;
    for (int t = 0; t < tiles; ++t) {
        if (t + 1 < tiles) __pipeline_memcpy_async(&nxt[threadIdx.x], &x[(t + 1) * TILE + threadIdx.x], sizeof(float));
        __pipeline_commit();
        __pipeline_wait_prior(1);
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += cur[k] * w[k * TILE + threadIdx.x];
        __syncthreads();
        float* tmp = cur; cur = nxt; nxt = tmp;
    }
    out[blockIdx.x * TILE + threadIdx.x] = acc;
}
"""

# A GEMM whose epilogue applies SiLU written inline (x * sigmoid(x)) before the store.
GEMM_SILU_INLINE = """
#define TS 16
__global__ void gemm_silu(const float* A, const float* B, float* C, int n) {
    __shared__ float a_s[TS][TS], b_s[TS][TS];
    int row = blockIdx.y * TS + threadIdx.y, col = blockIdx.x * TS + threadIdx.x;
    float v = 0.f;
    for (int p = 0; p < n / TS; ++p) {
        a_s[threadIdx.y][threadIdx.x] = A[row * n + p * TS + threadIdx.x];
        b_s[threadIdx.y][threadIdx.x] = B[(p * TS + threadIdx.y) * n + col];
        __syncthreads();
#pragma unroll
        for (int q = 0; q < TS; ++q) v = fmaf(a_s[threadIdx.y][q], b_s[q][threadIdx.x], v);
        __syncthreads();
    }
    C[row * n + col] = v / (1.0f + __expf(-v));
}
"""

# An RMS norm whose sum of squares is reduced with CUB's BlockReduce, then each element scaled in the same
# kernel.
RMSNORM_CUB = """
#include <cub/block/block_reduce.cuh>
template <int THREADS>
__global__ void rmsnorm_cub(const float* __restrict__ x, const float* __restrict__ g, float* __restrict__ y, int d) {
    using BlockReduce = cub::BlockReduce<float, THREADS>;
    __shared__ typename BlockReduce::TempStorage tmp;
    __shared__ float inv_rms;
    const float* xr = x + blockIdx.x * d;
    float ss = 0.f;
    for (int i = threadIdx.x; i < d; i += THREADS) ss += xr[i] * xr[i];
    float total = BlockReduce(tmp).Sum(ss);
    if (threadIdx.x == 0) inv_rms = rsqrtf(total / d + 1e-6f);
    __syncthreads();
    for (int i = threadIdx.x; i < d; i += THREADS) y[blockIdx.x * d + i] = xr[i] * inv_rms * g[i];
}
template __global__ void rmsnorm_cub<256>(const float*, const float*, float*, int);
"""

# Register blocking with float4 accumulators: each thread four rows of four columns, each loaded A value
# feeding four FMAs and each B vector four rows.
FLOAT4_ACCUMULATORS = """
__global__ void gemm_float4_acc(const float* __restrict__ A, const float4* __restrict__ B4, float4* __restrict__ C4, int M, int N4, int K) {
    int r0 = (blockIdx.y * blockDim.y + threadIdx.y) * 4;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    float4 acc[4];
    for (int i = 0; i < 4; ++i) acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int k = 0; k < K; ++k) {
        float4 b = B4[k * N4 + c];
        for (int i = 0; i < 4; ++i) {
            float a = A[(r0 + i) * K + k];
            acc[i].x += a * b.x; acc[i].y += a * b.y; acc[i].z += a * b.z; acc[i].w += a * b.w;
        }
    }
    for (int i = 0; i < 4; ++i) if (r0 + i < M) C4[(r0 + i) * N4 + c] = acc[i];
}
"""

PROBES.update({
    "pointer_swap_double_buffer": (POINTER_SWAP_DOUBLE_BUFFER, {"smem_tiling", "double_buffering"}),
    "gemm_silu_inline": (GEMM_SILU_INLINE, {"smem_tiling", "kernel_fusion"}),
    "rmsnorm_cub": (RMSNORM_CUB, {"kernel_fusion"}),
    "float4_accumulators": (FLOAT4_ACCUMULATORS, {"register_blocking"}),
})

# Two stages carved from extern shared memory, picked through a pointer pair by a flipped index: the next
# stage is loaded from global memory while the current one is read.
EXTERN_STAGE_POINTERS = """
__global__ void matvec_staged(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y, int n, int tile) {
    extern __shared__ float smem[];
    float* stage[2] = {smem, smem + tile};
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    for (int j = threadIdx.x; j < tile; j += blockDim.x) stage[0][j] = x[j];
    __syncthreads();
    float sum = 0.f;
    int cur = 0;
    for (int t = 0; t < n; t += tile) {
        if (t + tile < n)
            for (int j = threadIdx.x; j < tile; j += blockDim.x) stage[cur ^ 1][j] = x[t + tile + j];
        for (int j = 0; j < tile; ++j) sum += A[(size_t)row * n + t + j] * stage[cur][j];
        __syncthreads();
        cur ^= 1;
    }
    y[row] = sum;
}
"""

# A matrix-vector product whose vector chunk is staged in shared memory and read whole by every thread.
MATVEC_SHARED_X = """
#define CHUNK 256
__global__ void gemv_shared_x(const float* A, const float* x, float* y, int rows, int cols) {
    __shared__ float xs[CHUNK];
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.f;
    for (int c0 = 0; c0 < cols; c0 += CHUNK) {
        if (c0 + threadIdx.x < cols) xs[threadIdx.x] = x[c0 + threadIdx.x];
        __syncthreads();
        int lim = min(CHUNK, cols - c0);
        if (r < rows)
            for (int j = 0; j < lim; ++j) acc += A[r * cols + c0 + j] * xs[j];
        __syncthreads();
    }
    if (r < rows) y[r] = acc;
}
"""

# Cooperative-groups asynchronous copies of a tile into shared memory, waited for, then read whole by each
# thread (a 1-D convolution with the filter in shared memory and the signal tile around it).
CG_MEMCPY_ASYNC_TILE = """
#include <cooperative_groups.h>
#include <cooperative_groups/memcpy_async.h>
namespace cg = cooperative_groups;
#define TILE 256
#define TAPS 33
__global__ void fir_cg(const float* __restrict__ sig, const float* __restrict__ taps, float* __restrict__ out, int n) {
    __shared__ float win[TILE + TAPS - 1];
    __shared__ float h[TAPS];
    cg::thread_block block = cg::this_thread_block();
    int base = blockIdx.x * TILE;
    cg::memcpy_async(block, win, sig + base, sizeof(float) * (TILE + TAPS - 1));
    cg::memcpy_async(block, h, taps, sizeof(float) * TAPS);
    cg::wait(block);
    float acc = 0.f;
    for (int k = 0; k < TAPS; ++k) acc += h[k] * win[threadIdx.x + k];
    if (base + threadIdx.x < n) out[base + threadIdx.x] = acc;
}
"""

# A GEMM whose epilogue adds a bias and clamps at zero with max() inline.
GEMM_BIAS_RELU_MAX = """
#define TB 16
__global__ void fc_relu(const float* X, const float* W, const float* b, float* Y, int M, int N, int K) {
    __shared__ float Xs[TB][TB], Ws[TB][TB];
    int i = blockIdx.y * TB + threadIdx.y, j = blockIdx.x * TB + threadIdx.x;
    float s = 0.f;
    for (int k0 = 0; k0 < K; k0 += TB) {
        Xs[threadIdx.y][threadIdx.x] = X[i * K + k0 + threadIdx.x];
        Ws[threadIdx.y][threadIdx.x] = W[(k0 + threadIdx.y) * N + j];
        __syncthreads();
        for (int k = 0; k < TB; ++k) s += Xs[threadIdx.y][k] * Ws[k][threadIdx.x];
        __syncthreads();
    }
    Y[i * N + j] = max(s + b[j], 0.0f);
}
"""

# A transpose whose shared tile is swizzled through a helper (column XOR row), no padding.
TRANSPOSE_SWIZZLE_HELPER = """
#define TD 32
__device__ __forceinline__ int swz(int r, int c) { return r * TD + (c ^ r); }
__global__ void transpose_swizzled(const float* in, float* out, int w, int h) {
    __shared__ float t[TD * TD];
    int x = blockIdx.x * TD + threadIdx.x, y = blockIdx.y * TD + threadIdx.y;
    if (x < w && y < h) t[swz(threadIdx.y, threadIdx.x)] = in[y * w + x];
    __syncthreads();
    x = blockIdx.y * TD + threadIdx.x; y = blockIdx.x * TD + threadIdx.y;
    if (x < h && y < w) out[y * h + x] = t[swz(threadIdx.x, threadIdx.y)];
}
"""

# Near miss: a shared staging buffer each thread reads back at its own slot (no other thread's data).
OWN_SLOT_STAGING = """
__global__ void scale_staged(const float* in, float* out, float a, int n) {
    __shared__ float buf[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? in[i] : 0.f;
    __syncthreads();
    if (i < n) out[i] = a * buf[threadIdx.x];
}
"""

PROBES.update({
    "extern_stage_pointers": (EXTERN_STAGE_POINTERS, {"smem_tiling", "double_buffering"}),
    "matvec_shared_x": (MATVEC_SHARED_X, {"smem_tiling"}),
    "cg_memcpy_async_tile": (CG_MEMCPY_ASYNC_TILE, {"smem_tiling"}),
    "gemm_bias_relu_max": (GEMM_BIAS_RELU_MAX, {"smem_tiling", "kernel_fusion"}),
    "transpose_swizzle_helper": (TRANSPOSE_SWIZZLE_HELPER, {"smem_tiling", "bank_conflict_padding"}),
    "own_slot_staging": (OWN_SLOT_STAGING, set()),
})

# A 5-point Jacobi step: the block's tile and a one-cell border staged in shared memory, each output made
# from its four neighbours' cells (indices named i, j).
JACOBI_2D = """
#define BX 16
#define BY 16
__global__ void jacobi5(const float* __restrict__ u, float* __restrict__ v, int nx, int ny) {
    __shared__ float s[BY + 2][BX + 2];
    int gx = blockIdx.x * BX + threadIdx.x, gy = blockIdx.y * BY + threadIdx.y;
    int i = threadIdx.y + 1, j = threadIdx.x + 1;
    bool in = gx < nx && gy < ny;
    s[i][j] = in ? u[gy * nx + gx] : 0.f;
    if (threadIdx.x == 0) s[i][0] = gx > 0 && gy < ny ? u[gy * nx + gx - 1] : 0.f;
    if (threadIdx.x == BX - 1) s[i][BX + 1] = gx + 1 < nx && gy < ny ? u[gy * nx + gx + 1] : 0.f;
    if (threadIdx.y == 0) s[0][j] = gy > 0 && gx < nx ? u[(gy - 1) * nx + gx] : 0.f;
    if (threadIdx.y == BY - 1) s[BY + 1][j] = gy + 1 < ny && gx < nx ? u[(gy + 1) * nx + gx] : 0.f;
    __syncthreads();
    if (in && gx > 0 && gy > 0 && gx < nx - 1 && gy < ny - 1)
        v[gy * nx + gx] = 0.25f * (s[i - 1][j] + s[i + 1][j] + s[i][j - 1] + s[i][j + 1]);
}
"""

# A 2 x 2 register tile written out by hand: two A values and two B values loaded from the shared tiles per
# k, each feeding two FMAs into the accumulator array.
SGEMM_2X2_UNROLLED = """
#define TS 32
__global__ void sgemm_2x2(const float* A, const float* B, float* C, int n) {
    __shared__ float As[TS][TS];
    __shared__ float Bs[TS][TS];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TS + 2 * ty, col = blockIdx.x * TS + 2 * tx;
    float c[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
    for (int t = 0; t < n; t += TS) {
        for (int r = ty; r < TS; r += blockDim.y)
            for (int q = tx; q < TS; q += blockDim.x) {
                As[r][q] = A[(blockIdx.y * TS + r) * n + t + q];
                Bs[r][q] = B[(t + r) * n + blockIdx.x * TS + q];
            }
        __syncthreads();
        for (int k = 0; k < TS; ++k) {
            float a0 = As[2 * ty][k], a1 = As[2 * ty + 1][k];
            float b0 = Bs[k][2 * tx], b1 = Bs[k][2 * tx + 1];
            c[0][0] += a0 * b0; c[0][1] += a0 * b1;
            c[1][0] += a1 * b0; c[1][1] += a1 * b1;
        }
        __syncthreads();
    }
    C[row * n + col] = c[0][0]; C[row * n + col + 1] = c[0][1];
    C[(row + 1) * n + col] = c[1][0]; C[(row + 1) * n + col + 1] = c[1][1];
}
"""

# Near miss: a per-thread array of two statistics (a sum and a sum of squares): one output each, every
# loaded value feeding one product.
MOMENTS_ARRAY = """
__global__ void moments(const float* x, float* out, int n) {
    float m[2] = {0.f, 0.f};
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = x[i];
        m[0] += v;
        m[1] += v * v;
    }
    atomicAdd(&out[0], m[0]);
    atomicAdd(&out[1], m[1]);
}
"""

PROBES.update({
    "jacobi_2d": (JACOBI_2D, {"smem_tiling"}),
    "sgemm_2x2_unrolled": (SGEMM_2X2_UNROLLED, {"smem_tiling", "register_blocking"}),
    "moments_array": (MOMENTS_ARRAY, set()),
})

# A GEMM templated on its activation functor, built with GELU: the product is stored through the functor.
GEMM_FUNCTOR_EPILOGUE = """
struct GeluErf {
    __device__ float operator()(float x) const { return 0.5f * x * (1.0f + erff(x * 0.70710678f)); }
};
template <int TILE, typename Act>
__global__ void gemm_act(const float* A, const float* B, float* C, int n, Act act) {
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
    C[row * n + col] = act(acc);
}
template __global__ void gemm_act<16, GeluErf>(const float*, const float*, float*, int, GeluErf);
"""

# A warp-per-row softmax: the row's max and sum reduced with shuffles, then the same warp writes the row.
SOFTMAX_WARP_ROW = """
__global__ void softmax_warp(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (warp >= rows) return;
    const float* xr = x + (size_t)warp * cols;
    float m = -1e30f;
    for (int c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
    for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.f;
    for (int c = lane; c < cols; c += 32) s += expf(xr[c] - m);
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    for (int c = lane; c < cols; c += 32) y[(size_t)warp * cols + c] = expf(xr[c] - m) / s;
}
"""

PROBES.update({
    "gemm_functor_epilogue": (GEMM_FUNCTOR_EPILOGUE, {"smem_tiling", "kernel_fusion"}),
    "softmax_warp_row": (SOFTMAX_WARP_ROW, {"kernel_fusion"}),
})

# Near miss for double buffering: a [2][N] shared array whose two rows are two operands, not two stages.
TWO_OPERAND_ROWS = """
#define N 128
__global__ void pair_dots(const float* a, const float* b, float* out, int chunks) {
    __shared__ float s[2][N];
    float acc = 0.f;
    for (int c = 0; c < chunks; ++c) {
        s[0][threadIdx.x] = a[c * N + threadIdx.x];
        s[1][threadIdx.x] = b[c * N + threadIdx.x];
        __syncthreads();
        for (int k = 0; k < N; ++k) acc += s[0][k] * s[1][(k + threadIdx.x) % N];
        __syncthreads();
    }
    out[blockIdx.x * N + threadIdx.x] = acc;
}
"""

PROBES.update({"two_operand_rows": (TWO_OPERAND_ROWS, {"smem_tiling"})})


@pytest.mark.parametrize("name", sorted(PROBES))
def test_probe_found_from_the_source(name):
    source, want = PROBES[name]
    assert detect_features(source, (), CATALOGUE) == want


@pytest.mark.parametrize("name", sorted(PROBES))
def test_probe_found_with_the_build(name, tmp_path):
    source, want = PROBES[name]
    kernels, sass = built(tmp_path, source)
    assert detect_features(source, kernels, CATALOGUE, sass=sass) == want


# ----------------------------------------------------------------- the rules these probes widened, near misses

def test_a_swapped_shared_pointer_filled_by_copies_is_tiling_only_when_other_threads_read_it():
    assert found("smem_tiling", POINTER_SWAP_DOUBLE_BUFFER)
    # near miss: each thread reads back only its own slot of the copied tile
    own = POINTER_SWAP_DOUBLE_BUFFER.replace("acc += cur[k] * w[k * TILE + threadIdx.x]",
                                             "acc += cur[threadIdx.x] * w[k * TILE + threadIdx.x]")
    assert own != POINTER_SWAP_DOUBLE_BUFFER and not found("smem_tiling", own)


def test_an_fma_accumulation_stored_through_a_nonlinearity_is_fused():
    assert found("kernel_fusion", GEMM_SILU_INLINE)
    # near miss: the same product stored as it is
    plain = GEMM_SILU_INLINE.replace("v / (1.0f + __expf(-v))", "v")
    assert plain != GEMM_SILU_INLINE and not found("kernel_fusion", plain)


def test_vector_accumulators_fed_in_a_nested_loop_are_register_blocking():
    assert found("register_blocking", FLOAT4_ACCUMULATORS)
    # near miss: an array of positions, each stepped once by its velocity (coordinates, not accumulators)
    coords = """
__global__ void step(float4* p, const float4* v, float dt, int n) {
    float4 pos[2];
    int i0 = (blockIdx.x * blockDim.x + threadIdx.x) * 2;
    for (int i = 0; i < 2; ++i) pos[i] = p[i0 + i];
    for (int i = 0; i < 2; ++i) {
        float4 vel = v[i0 + i];
        pos[i].x += dt * vel.x; pos[i].y += dt * vel.y; pos[i].z += dt * vel.z;
    }
    for (int i = 0; i < 2; ++i) p[i0 + i] = pos[i];
}
"""
    assert not found("register_blocking", coords)


def test_an_odd_row_length_is_padding_only_as_an_inner_dimension():
    assert found("bank_conflict_padding", "__global__ void k(float* o) { __shared__ float t[32][33];"
                " t[threadIdx.y][threadIdx.x] = o[threadIdx.x]; __syncthreads(); o[threadIdx.x] = t[threadIdx.x][threadIdx.y]; }")
    # near miss: a 1-D array of 33 filter taps (the probe's FIR kernel)
    assert not found("bank_conflict_padding", CG_MEMCPY_ASYNC_TILE)


def test_a_helper_that_xors_the_column_with_the_row_inside_the_row_is_a_swizzle():
    assert found("bank_conflict_padding", TRANSPOSE_SWIZZLE_HELPER)
    # near miss: a bitonic partner computed by a helper (i ^ j, no row offset)
    partner = BITONIC_SHARED.replace("__global__", "__device__ unsigned partner(unsigned i, unsigned j) { return i ^ j; }\n"
                                     "__global__", 1).replace("t ^ j", "partner(t, j)")
    assert "partner(t, j)" in partner and not found("bank_conflict_padding", partner)


def test_a_tile_indexed_through_one_function_with_swapped_arguments_is_a_transpose():
    assert found("smem_tiling", TRANSPOSE_SWIZZLE_HELPER)
    # near miss: read back at the same (y, x) the thread wrote
    same = TRANSPOSE_SWIZZLE_HELPER.replace("t[swz(threadIdx.x, threadIdx.y)]", "t[swz(threadIdx.y, threadIdx.x)]")
    assert same != TRANSPOSE_SWIZZLE_HELPER and not found("smem_tiling", same)


def test_stage_pointers_written_at_a_flipped_index_are_double_buffering():
    assert found("double_buffering", EXTERN_STAGE_POINTERS)
    # near miss: the same pointer pair, the index never flipped (one stage used, the other idle)
    one = EXTERN_STAGE_POINTERS.replace("stage[cur ^ 1][j]", "stage[cur][j]").replace("cur ^= 1;", "")
    assert one != EXTERN_STAGE_POINTERS and not found("double_buffering", one)


def test_a_product_stored_through_max_is_fused():
    assert found("kernel_fusion", GEMM_BIAS_RELU_MAX)
    # near miss: the bias added, no clamp
    plain = GEMM_BIAS_RELU_MAX.replace("max(s + b[j], 0.0f)", "s + b[j]")
    assert plain != GEMM_BIAS_RELU_MAX and not found("kernel_fusion", plain)


def test_hand_unrolled_accumulators_sharing_an_operand_are_register_blocking():
    assert found("register_blocking", SGEMM_2X2_UNROLLED)
    # near misses: two statistics of one value (the probe), and two accumulators with no operand in common
    assert not found("register_blocking", MOMENTS_ARRAY)
    apart = SGEMM_2X2_UNROLLED.replace("c[0][0] += a0 * b0; c[0][1] += a0 * b1;\n            c[1][0] += a1 * b0; c[1][1] += a1 * b1;",
                                       "c[0][0] += a0 * b0; c[1][1] += a1 * b1;")
    assert apart != SGEMM_2X2_UNROLLED and not found("register_blocking", apart)


def test_a_product_stored_through_a_nonlinear_functor_parameter_is_fused():
    assert found("kernel_fusion", GEMM_FUNCTOR_EPILOGUE)
    # near miss: the functor scales (no nonlinearity)
    linear = GEMM_FUNCTOR_EPILOGUE.replace("0.5f * x * (1.0f + erff(x * 0.70710678f))", "2.0f * x")
    assert linear != GEMM_FUNCTOR_EPILOGUE and not found("kernel_fusion", linear)


WMMA_HELPER = """#include <mma.h>
using namespace nvcuda;
__device__ void mma_tile(wmma::fragment<wmma::accumulator, 16, 16, 16, float>& acc, const half As[16][24], const half Bs[16][24]) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
    wmma::load_matrix_sync(a, &As[0][0], 24);
    wmma::load_matrix_sync(b, &Bs[0][0], 24);
    wmma::mma_sync(acc, a, b, acc);
}
__global__ void hgemm_helper(const half* A, const half* B, float* C, int n) {
    __shared__ half As[16][24];
    __shared__ half Bs[16][24];
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.f);
    for (int t = 0; t < n; t += 16) {
        for (int i = threadIdx.x; i < 256; i += 32) {
            As[i / 16][i % 16] = A[(blockIdx.y * 16 + i / 16) * n + t + i % 16];
            Bs[i / 16][i % 16] = B[(t + i / 16) * n + blockIdx.x * 16 + i % 16];
        }
        __syncthreads();
        mma_tile(acc, As, Bs);
        __syncthreads();
    }
    wmma::store_matrix_sync(C + blockIdx.y * 16 * n + blockIdx.x * 16, acc, n, wmma::mem_row_major);
}
"""


def test_a_shared_tile_handed_to_a_helper_that_loads_wmma_operands_from_it_is_tiling():
    assert found("smem_tiling", WMMA_HELPER)
    # near miss: the helper loads its operands straight from global memory; nothing is staged in shared memory
    direct = """#include <mma.h>
using namespace nvcuda;
__device__ void mma_tile(wmma::fragment<wmma::accumulator, 16, 16, 16, float>& acc, const half* As, const half* Bs, int n) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
    wmma::load_matrix_sync(a, &As[0], n);
    wmma::load_matrix_sync(b, &Bs[0], n);
    wmma::mma_sync(acc, a, b, acc);
}
__global__ void hgemm_direct(const half* A, const half* B, float* C, int n) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.f);
    for (int t = 0; t < n; t += 16) mma_tile(acc, A + blockIdx.y * 16 * n + t, B + t * n + blockIdx.x * 16, n);
    wmma::store_matrix_sync(C + blockIdx.y * 16 * n + blockIdx.x * 16, acc, n, wmma::mem_row_major);
}
"""
    assert not found("smem_tiling", direct)
