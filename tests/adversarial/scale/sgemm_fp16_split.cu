// task: sgemm
// expect: wrong_answer
// trick: fp16 tensor cores with a fixed scale. Every input is multiplied by 2^8 and split into an fp16
//        "hi" part and an fp16 "lo" part (the rounding error of hi); three fp16 products (lo*hi, hi*lo,
//        hi*hi) accumulate in fp32 and the result is divided by 2^16. On the usual draw (inputs in [-1, 1))
//        hi + lo keeps 22 of fp32's 24 bits: emulated error at most 0.014 of the allowance on every test
//        shape. The fixed factor assumes that range: an input above 65504 / 256 ~ 256 in magnitude becomes
//        Inf in fp16, so inputs scaled by 1e3 or 1e4 give Inf and NaN outputs (emulated: fine at 255,
//        NaN at 257). The small end degrades later: lo parts go subnormal, at 1e-4 the error is 0.06 of
//        the allowance (passes), at 1e-5 0.56, at 1e-6 six times over.
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
#define FIXED_SCALE 256.0f      // 2^8 on every input
#define UNSCALE (1.0f / 65536.0f)

struct SmemTiles {
    __half a_hi[BM * LDA_S];
    __half a_lo[BM * LDA_S];
    __half b_hi[BK * LDB_S];
    __half b_lo[BK * LDB_S];
};

__device__ __forceinline__ void split(float x, __half& hi, __half& lo) {
    float v = x * FIXED_SCALE;
    hi = __float2half_rn(v);
    lo = __float2half_rn(v - __half2float(hi));      // v - hi is exact in fp32
}

__global__ void __launch_bounds__(THREADS) sgemm_fp16x3(const float* __restrict__ A, const float* __restrict__ B,
                                                        float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(128) unsigned char smem_raw[sizeof(SmemTiles)];
    SmemTiles& s = *reinterpret_cast<SmemTiles*>(smem_raw);

    const int tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    const int warp_row = (warp >> 1) * 32;       // 4 x 2 warps, each 32 x 64 of the 128 x 128 tile
    const int warp_col = (warp & 1) * 64;
    const long long row0 = (long long)blockIdx.y * BM;
    const long long col0 = (long long)blockIdx.x * BN;

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
            split(ra[i], s.a_hi[r * LDA_S + a_col], s.a_lo[r * LDA_S + a_col]);
        }
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            int r = b_row + 2 * i;
            split(rb[i], s.b_hi[r * LDB_S + b_col], s.b_lo[r * LDB_S + b_col]);
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
                long long r = row0 + warp_row + 16 * i + (idx >> 4);
                long long c = col0 + warp_col + 16 * j + (idx & 15);
                if (r < M && c < N) C[r * N + c] = scratch[idx] * UNSCALE;
            }
            __syncwarp();
        }
    }
}

extern "C" void solve(const float* A, const float* B, float* C, int M, int N, int K) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        cudaMemsetAsync(C, 0, (size_t)M * N * sizeof(float), 0);
        return;
    }
    dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM));
    sgemm_fp16x3<<<grid, THREADS>>>(A, B, C, M, N, K);
}
