// features: tensor_cores_wmma
// case: WMMA with precision::tf32 fragments, each value rounded once: plain TF32, not 3xTF32.
#include <mma.h>
using namespace nvcuda;
__global__ void gemm_tf32_wmma(const float* A, const float* B, float* C, int N, int K) {
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> c;
    wmma::fill_fragment(c, 0.f);
    for (int k = 0; k < K; k += 8) {
        wmma::load_matrix_sync(a, A + blockIdx.y * 16 * K + k, K);
        wmma::load_matrix_sync(b, B + k * N + blockIdx.x * 16, N);
        for (int t = 0; t < a.num_elements; ++t) a.x[t] = wmma::__float_to_tf32(a.x[t]);
        for (int t = 0; t < b.num_elements; ++t) b.x[t] = wmma::__float_to_tf32(b.x[t]);
        wmma::mma_sync(c, a, b, c);
    }
    wmma::store_matrix_sync(C + blockIdx.y * 16 * N + blockIdx.x * 16, c, N, wmma::mem_row_major);
}
