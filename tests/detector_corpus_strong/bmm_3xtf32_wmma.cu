// features: tensor_cores_3xtf32, tensor_cores_wmma, smem_tiling, coalesced_access, readonly_cache, loop_unrolling, occupancy_tuning
// case: batched fp32 matmul on tf32 WMMA with a 3xTF32 split of every fragment; tiles staged in shared memory.
#include <cuda_runtime.h>
#include <mma.h>
using namespace nvcuda;

constexpr int TM = 32, TN = 32, TK = 8;

__global__ void __launch_bounds__(128) bmm_3xtf32(const float* __restrict__ A, const float* __restrict__ B,
                                                  float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(32) float As[TM * TK];
    __shared__ __align__(32) float Bs[TK * TN];
    __shared__ __align__(32) float Cs[TM * TN];
    const int b = blockIdx.z, m0 = blockIdx.y * TM, n0 = blockIdx.x * TN, warp = threadIdx.x / 32;
    const int wm = (warp / 2) * 16, wn = (warp % 2) * 16;
    A += (size_t)b * M * K; B += (size_t)b * K * N; C += (size_t)b * M * N;
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a_big, a_small;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b_big, b_small;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
    wmma::fill_fragment(acc, 0.f);
    for (int k0 = 0; k0 < K; k0 += TK) {
        for (int i = threadIdx.x; i < TM * TK; i += blockDim.x) {
            int r = i / TK, c = i % TK;
            As[i] = (m0 + r < M && k0 + c < K) ? A[(size_t)(m0 + r) * K + k0 + c] : 0.f;
        }
        for (int i = threadIdx.x; i < TK * TN; i += blockDim.x) {
            int r = i / TN, c = i % TN;
            Bs[i] = (k0 + r < K && n0 + c < N) ? B[(size_t)(k0 + r) * N + n0 + c] : 0.f;
        }
        __syncthreads();
        wmma::load_matrix_sync(a_big, As + wm * TK, TK);
        wmma::load_matrix_sync(b_big, Bs + wn, TN);
        #pragma unroll
        for (int i = 0; i < a_big.num_elements; ++i) {
            float x = a_big.x[i];
            a_big.x[i] = wmma::__float_to_tf32(x);
            a_small.x[i] = wmma::__float_to_tf32(x - a_big.x[i]);
        }
        #pragma unroll
        for (int i = 0; i < b_big.num_elements; ++i) {
            float x = b_big.x[i];
            b_big.x[i] = wmma::__float_to_tf32(x);
            b_small.x[i] = wmma::__float_to_tf32(x - b_big.x[i]);
        }
        wmma::mma_sync(acc, a_small, b_big, acc);
        wmma::mma_sync(acc, a_big, b_small, acc);
        wmma::mma_sync(acc, a_big, b_big, acc);
        __syncthreads();
    }
    wmma::store_matrix_sync(Cs + wm * TN + wn, acc, TN, wmma::mem_row_major);
    __syncthreads();
    for (int i = threadIdx.x; i < TM * TN; i += blockDim.x) {
        int r = i / TN, c = i % TN;
        if (m0 + r < M && n0 + c < N) C[(size_t)(m0 + r) * N + n0 + c] = Cs[i];
    }
}

extern "C" void solve(const float* A, const float* B, float* C, int batch, int M, int N, int K) {
    dim3 grid((N + TN - 1) / TN, (M + TM - 1) / TM, batch);
    bmm_3xtf32<<<grid, 128>>>(A, B, C, M, N, K);
}
