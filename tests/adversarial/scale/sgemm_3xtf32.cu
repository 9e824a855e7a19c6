// task: sgemm
// expect: ok
// trick: none: 3xTF32. Each fp32 input x is split on the tensor cores' input format into big = tf32(x)
//        and small = tf32(x - big) (x - big is exact in fp32); three tf32 products (small*big, big*small,
//        big*big) accumulate in fp32. tf32 keeps fp32's 8-bit exponent, so the split works at any scale
//        (1e-4 to 1e4 and far beyond): emulated with truncated (masked) tf32 parts, the error is at most
//        0.014 of the allowance at scales 1, 1e4 and 1e-4 on every test shape (the kernel rounds the parts
//        to nearest with cvt.rna, which is at least as accurate).
#include <cuda_runtime.h>
#include <mma.h>

using namespace nvcuda;

#define BM 128
#define BN 128
#define BK 32
#define THREADS 256
#define LDA_S (BK + 4)          // floats per row of the A tile (a multiple of 4)
#define LDB_S (BN + 4)          // floats per row of the B tile

struct SmemTiles {
    float a[BM * LDA_S];
    float b[BK * LDB_S];
};

typedef wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> FragA;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> FragB;
typedef wmma::fragment<wmma::accumulator, 16, 16, 8, float> FragC;

template <typename Frag>
__device__ __forceinline__ void split(Frag& big, Frag& small) {     // big holds the raw fp32 values on entry
#pragma unroll
    for (int t = 0; t < big.num_elements; ++t) {
        float x = big.x[t];
        float b = wmma::__float_to_tf32(x);
        big.x[t] = b;
        small.x[t] = wmma::__float_to_tf32(x - b);
    }
}

__global__ void __launch_bounds__(THREADS) sgemm_3xtf32(const float* __restrict__ A, const float* __restrict__ B,
                                                        float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(128) unsigned char smem_raw[sizeof(SmemTiles)];
    SmemTiles& s = *reinterpret_cast<SmemTiles*>(smem_raw);

    const int tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    const int warp_row = (warp >> 1) * 32;       // 4 x 2 warps, each 32 x 64 of the 128 x 128 tile
    const int warp_col = (warp & 1) * 64;
    const long long row0 = (long long)blockIdx.y * BM;
    const long long col0 = (long long)blockIdx.x * BN;

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

    FragC acc[2][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    const int steps = (K + BK - 1) / BK;
    load(0);
    for (int t = 0; t < steps; ++t) {
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 16; ++i) s.a[(a_row + 8 * i) * LDA_S + a_col] = ra[i];
#pragma unroll
        for (int i = 0; i < 16; ++i) s.b[(b_row + 2 * i) * LDB_S + b_col] = rb[i];
        __syncthreads();
        if (t + 1 < steps) load((t + 1) * BK);

#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            FragA a_big[2], a_small[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                wmma::load_matrix_sync(a_big[i], s.a + (warp_row + 16 * i) * LDA_S + kk, LDA_S);
                split(a_big[i], a_small[i]);
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                FragB b_big, b_small;
                wmma::load_matrix_sync(b_big, s.b + kk * LDB_S + warp_col + 16 * j, LDB_S);
                split(b_big, b_small);
#pragma unroll
                for (int i = 0; i < 2; ++i) {                 // small products first
                    wmma::mma_sync(acc[i][j], a_small[i], b_big, acc[i][j]);
                    wmma::mma_sync(acc[i][j], a_big[i], b_small, acc[i][j]);
                    wmma::mma_sync(acc[i][j], a_big[i], b_big, acc[i][j]);
                }
            }
        }
    }

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
                if (r < M && c < N) C[r * N + c] = scratch[idx];
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
    sgemm_3xtf32<<<grid, THREADS>>>(A, B, C, M, N, K);
}
