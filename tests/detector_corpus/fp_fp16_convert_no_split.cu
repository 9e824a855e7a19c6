// features: reduced_precision, tensor_cores_wmma, coalesced_access, smem_tiling
// case: trap: fp32 data rounded to fp16 for plain fp16 WMMA products, with no residual: not a split.
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;

__global__ void gemm_plain_fp16(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ __align__(32) __half a[256], b[256];
    const int m0 = blockIdx.y * 16, n0 = blockIdx.x * 16;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.f);
    for (int k = 0; k < K; k += 16) {
        for (int i = threadIdx.x; i < 256; i += 32) {
            a[i] = __float2half_rn(A[(m0 + i / 16) * K + k + i % 16]);
            b[i] = __float2half_rn(B[(k + i / 16) * N + n0 + i % 16]);
        }
        __syncwarp();
        wmma::load_matrix_sync(fa, a, 16);
        wmma::load_matrix_sync(fb, b, 16);
        wmma::mma_sync(acc, fa, fb, acc);
        __syncwarp();
    }
    wmma::store_matrix_sync(C + m0 * N + n0, acc, N, wmma::mem_row_major);
}
