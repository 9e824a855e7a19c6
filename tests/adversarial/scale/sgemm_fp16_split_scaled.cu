// task: sgemm
// expect: ok
// trick: none: the fp16 split of sgemm_fp16_split.cu with the range handled. A pre-pass finds max |value|
//        of every row of A and every column of B (atomicMax on the bits of non-negative floats); the GEMM
//        scales each row of A and each column of B by the power of two that brings its max into
//        [2^9, 2^10), splits the scaled values into fp16 hi + lo, runs the same three fp16 tensor-core
//        products with fp32 accumulation and divides by the two powers of two (exact: ldexpf). Any input
//        range that fp32 holds (max |value| from 2^-116 up) lands in fp16's normal range; emulated error at
//        most 0.015 of the allowance at scales 1, 1e4 and 1e-4 on every test shape. The workspace (one
//        word per row of A and per column of B) is allocated at the first call and grown when needed.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

using namespace nvcuda;

#define BM 128
#define BN 128
#define BK 32
#define THREADS 256
#define LDA_S (BK + 8)          // halves per row of the A tiles (a multiple of 8, rows 16-byte aligned)
#define LDB_S (BN + 8)          // halves per row of the B tiles
#define TARGET_EXP 9            // a row's (column's) max |value| is scaled into [2^9, 2^10)

struct SmemTiles {
    __half a_hi[BM * LDA_S];
    __half a_lo[BM * LDA_S];
    __half b_hi[BK * LDB_S];
    __half b_lo[BK * LDB_S];
};

// The power of two (its exponent) that brings max |value| (given by its float bits) into [2^9, 2^10);
// 0 for an all-zero row, clamped so that 2^e stays a normal float.
__device__ __forceinline__ int scale_exp(unsigned bits) {
    if (bits == 0u) return 0;
    int biased = (int)(bits >> 23);                   // bits of a non-negative float
    int e = TARGET_EXP + 127 - biased;
    return max(-126, min(126, e));
}

__device__ __forceinline__ float pow2(int e) { return __int_as_float((127 + e) << 23); }   // -126 <= e <= 127

__global__ void row_absmax(const float* __restrict__ A, unsigned* __restrict__ out, int M, int K) {
    long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (row >= M) return;
    const float* a = A + row * K;
    float m = 0.0f;
    for (int k = lane; k < K; k += 32) m = fmaxf(m, fabsf(a[k]));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0) out[row] = __float_as_uint(m);
}

// block (32, 8): 32 columns, 8 row slices; out must be zero on entry
__global__ void col_absmax(const float* __restrict__ B, unsigned* __restrict__ out, int K, int N) {
    __shared__ float part[8][33];
    long long c = (long long)blockIdx.x * 32 + threadIdx.x;
    float m = 0.0f;
    if (c < N)
        for (long long k = (long long)blockIdx.y * 8 + threadIdx.y; k < K; k += (long long)gridDim.y * 8)
            m = fmaxf(m, fabsf(B[k * N + c]));
    part[threadIdx.y][threadIdx.x] = m;
    __syncthreads();
    if (threadIdx.y == 0 && c < N) {
#pragma unroll
        for (int y = 1; y < 8; ++y) m = fmaxf(m, part[y][threadIdx.x]);
        atomicMax(out + c, __float_as_uint(m));        // non-negative floats order as their bits
    }
}

__device__ __forceinline__ void split(float x, float scale, __half& hi, __half& lo) {
    float v = x * scale;                              // a power of two: exact
    hi = __float2half_rn(v);
    lo = __float2half_rn(v - __half2float(hi));      // v - hi is exact in fp32
}

__global__ void __launch_bounds__(THREADS) sgemm_fp16x3(const float* __restrict__ A, const float* __restrict__ B,
                                                        float* __restrict__ C, int M, int N, int K,
                                                        const unsigned* __restrict__ row_max,
                                                        const unsigned* __restrict__ col_max) {
    __shared__ __align__(128) unsigned char smem_raw[sizeof(SmemTiles)];
    __shared__ int row_exp[BM], col_exp[BN];
    __shared__ float row_scale[BM], col_scale[BN];
    SmemTiles& s = *reinterpret_cast<SmemTiles*>(smem_raw);

    const int tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    const int warp_row = (warp >> 1) * 32;       // 4 x 2 warps, each 32 x 64 of the 128 x 128 tile
    const int warp_col = (warp & 1) * 64;
    const long long row0 = (long long)blockIdx.y * BM;
    const long long col0 = (long long)blockIdx.x * BN;
    if (tid < BM) {
        long long r = row0 + tid;
        int e = r < M ? scale_exp(row_max[r]) : 0;
        row_exp[tid] = e;
        row_scale[tid] = pow2(e);
    } else {
        long long c = col0 + (tid - BM);
        int e = c < N ? scale_exp(col_max[c]) : 0;
        col_exp[tid - BM] = e;
        col_scale[tid - BM] = pow2(e);
    }

    // the fp32 tile staged in registers (loaded one step ahead of the tensor-core work)
    float ra[16], rb[16];
    const int a_col = tid & 31, a_row = tid >> 5;     // A tile: rows a_row + 8 i, column a_col
    const int b_col = tid & 127, b_row = tid >> 7;    // B tile: rows b_row + 2 i, column b_col

    auto load = [&](int k0) {
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            long long r = row0 + a_row + 8 * i;
            int k = k0 + a_col;
            ra[i] = (r < M && k < K) ? A[r * K + k] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            int k = k0 + b_row + 2 * i;
            long long c = col0 + b_col;
            rb[i] = (k < K && c < N) ? B[(long long)k * N + c] : 0.0f;
        }
    };

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    const int steps = (K + BK - 1) / BK;
    load(0);
    for (int t = 0; t < steps; ++t) {
        __syncthreads();                              // the previous step's fragments are loaded
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            int r = a_row + 8 * i;
            split(ra[i], row_scale[r], s.a_hi[r * LDA_S + a_col], s.a_lo[r * LDA_S + a_col]);
        }
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            int r = b_row + 2 * i;
            split(rb[i], col_scale[b_col], s.b_hi[r * LDB_S + b_col], s.b_lo[r * LDB_S + b_col]);
        }
        __syncthreads();
        if (t + 1 < steps) load((t + 1) * BK);        // global loads in flight during the mma work

#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> ah[2], al[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> bh, bl;
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                wmma::load_matrix_sync(ah[i], s.a_hi + (warp_row + 16 * i) * LDA_S + kk, LDA_S);
                wmma::load_matrix_sync(al[i], s.a_lo + (warp_row + 16 * i) * LDA_S + kk, LDA_S);
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                wmma::load_matrix_sync(bh, s.b_hi + kk * LDB_S + warp_col + 16 * j, LDB_S);
                wmma::load_matrix_sync(bl, s.b_lo + kk * LDB_S + warp_col + 16 * j, LDB_S);
#pragma unroll
                for (int i = 0; i < 2; ++i) {                 // small products first
                    wmma::mma_sync(acc[i][j], al[i], bh, acc[i][j]);
                    wmma::mma_sync(acc[i][j], ah[i], bl, acc[i][j]);
                    wmma::mma_sync(acc[i][j], ah[i], bh, acc[i][j]);
                }
            }
        }
    }

    // epilogue: each warp stages a 16 x 16 result in shared memory (over the A tiles) and writes it bounded
    __syncthreads();
    float* scratch = reinterpret_cast<float*>(smem_raw) + warp * 256;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            wmma::store_matrix_sync(scratch, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                int idx = lane + 32 * e;
                int lr = warp_row + 16 * i + (idx >> 4), lc = warp_col + 16 * j + (idx & 15);
                long long r = row0 + lr, c = col0 + lc;
                if (r < M && c < N) C[r * N + c] = ldexpf(scratch[idx], -(row_exp[lr] + col_exp[lc]));
            }
            __syncwarp();
        }
    }
}

// workspace: max |value| bits per row of A, then per column of B; grown when a call needs more
static unsigned* workspace = nullptr;
static size_t workspace_words = 0;

extern "C" void solve(const float* A, const float* B, float* C, int M, int N, int K) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        cudaMemsetAsync(C, 0, (size_t)M * N * sizeof(float), 0);
        return;
    }
    size_t words = (size_t)M + (size_t)N;
    if (words > workspace_words) {
        if (workspace) cudaFree(workspace);
        workspace = nullptr;
        workspace_words = 0;
        if (cudaMalloc(&workspace, words * sizeof(unsigned)) != cudaSuccess) return;
        workspace_words = words;
    }
    unsigned* row_max = workspace;
    unsigned* col_max = workspace + M;
    cudaMemsetAsync(col_max, 0, (size_t)N * sizeof(unsigned), 0);
    row_absmax<<<(unsigned)(((long long)M * 32 + 255) / 256), 256>>>(A, row_max, M, K);
    unsigned gy = (unsigned)((K + 255) / 256);                   // 256 rows of B per block at least
    if (gy > 64u) gy = 64u;
    col_absmax<<<dim3((unsigned)((N + 31) / 32), gy), dim3(32, 8)>>>(B, col_max, K, N);
    dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM));
    sgemm_fp16x3<<<grid, THREADS>>>(A, B, C, M, N, K, row_max, col_max);
}
