// features: tensor_cores_split_fp16, tensor_cores_wmma, smem_tiling, reduced_precision, coalesced_access, readonly_cache, occupancy_tuning
// case: C = A (fp16) * B (fp32) at fp32 accuracy: A is exact in fp16, B splits into hi + lo halves: 2xFP16, two products.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;

constexpr int T = 16;

__global__ void __launch_bounds__(32) gemm_2xfp16(const __half* __restrict__ A, const float* __restrict__ B,
                                                  float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(32) __half As[T * T];
    __shared__ __align__(32) __half Bh[T * T];
    __shared__ __align__(32) __half Bl[T * T];
    __shared__ __align__(32) float Cs[T * T];
    const int m0 = blockIdx.y * T, n0 = blockIdx.x * T;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> bh, bl;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc, acc_lo;
    wmma::fill_fragment(acc, 0.f);
    wmma::fill_fragment(acc_lo, 0.f);
    for (int k0 = 0; k0 < K; k0 += T) {
        for (int i = threadIdx.x; i < T * T; i += 32) {
            int r = i / T, c = i % T;
            As[i] = (m0 + r < M && k0 + c < K) ? A[(size_t)(m0 + r) * K + k0 + c] : __float2half(0.f);
            float v = (k0 + r < K && n0 + c < N) ? B[(size_t)(k0 + r) * N + n0 + c] : 0.f;
            __half h = __float2half_rn(v);
            Bh[i] = h;
            Bl[i] = __float2half_rn((v - __half2float(h)) * 1024.f);   // the residual, scaled into fp16's range
        }
        __syncwarp();
        wmma::load_matrix_sync(a, As, T);
        wmma::load_matrix_sync(bh, Bh, T);
        wmma::load_matrix_sync(bl, Bl, T);
        wmma::mma_sync(acc_lo, a, bl, acc_lo);
        wmma::mma_sync(acc, a, bh, acc);
        __syncwarp();
    }
    for (int i = 0; i < acc.num_elements; ++i) acc.x[i] += acc_lo.x[i] * (1.f / 1024.f);
    wmma::store_matrix_sync(Cs, acc, T, wmma::mem_row_major);
    __syncwarp();
    for (int i = threadIdx.x; i < T * T; i += 32) {
        int r = i / T, c = i % T;
        if (m0 + r < M && n0 + c < N) C[(size_t)(m0 + r) * N + n0 + c] = Cs[i];
    }
}

extern "C" void solve(const __half* A, const float* B, float* C, int M, int N, int K) {
    dim3 grid((N + T - 1) / T, (M + T - 1) / T);
    gemm_2xfp16<<<grid, 32>>>(A, B, C, M, N, K);
}
