// features: tensor_cores_wmma, smem_tiling, coalesced_access
// case: WMMA HGEMM staging 64x64 tiles of half in shared memory; fp32 accumulators.
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;
__global__ void hgemm_wmma(const half* A, const half* B, float* C, int M, int N, int K) {
    __shared__ half sa[64][16], sb[16][64];
    int warp = threadIdx.x / 32;
    int wm = warp / 2, wn = warp % 2;                    // 8 warps: 4 x 2 of 16 x 32
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
    wmma::fill_fragment(acc[0], 0.f);
    wmma::fill_fragment(acc[1], 0.f);
    for (int k0 = 0; k0 < K; k0 += 16) {
        for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) {
            sa[i / 16][i % 16] = A[(size_t)(blockIdx.y * 64 + i / 16) * K + k0 + i % 16];
            sb[i / 64][i % 64] = B[(size_t)(k0 + i / 64) * N + blockIdx.x * 64 + i % 64];
        }
        __syncthreads();
        wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
        wmma::load_matrix_sync(fa, &sa[wm * 16][0], 16);
        for (int j = 0; j < 2; ++j) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> fb;
            wmma::load_matrix_sync(fb, &sb[0][wn * 32 + j * 16], 64);
            wmma::mma_sync(acc[j], fa, fb, acc[j]);
        }
        __syncthreads();
    }
    for (int j = 0; j < 2; ++j)
        wmma::store_matrix_sync(C + (size_t)(blockIdx.y * 64 + wm * 16) * N + blockIdx.x * 64 + wn * 32 + j * 16, acc[j], N,
                                wmma::mem_row_major);
}
