// features: smem_tiling, cp_async, double_buffering, coalesced_access
// case: tiled SGEMM whose next K tile is fetched with cp.async into the other stage while this one is used.
#include <cuda_pipeline.h>
#define TS 32
__global__ void sgemm_pipelined(const float* A, const float* B, float* C, int n) {
    __shared__ float As[2][TS][TS], Bs[2][TS][TS];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TS + ty, col = blockIdx.x * TS + tx;
    int tiles = n / TS;
    __pipeline_memcpy_async(&As[0][ty][tx], &A[row * n + tx], 4);
    __pipeline_memcpy_async(&Bs[0][ty][tx], &B[ty * n + col], 4);
    __pipeline_commit();
    float acc = 0.f;
    for (int t = 0; t < tiles; ++t) {
        int s = t % 2;
        if (t + 1 < tiles) {
            __pipeline_memcpy_async(&As[s ^ 1][ty][tx], &A[row * n + (t + 1) * TS + tx], 4);
            __pipeline_memcpy_async(&Bs[s ^ 1][ty][tx], &B[((t + 1) * TS + ty) * n + col], 4);
        }
        __pipeline_commit();
        __pipeline_wait_prior(1);
        __syncthreads();
        for (int k = 0; k < TS; ++k) acc += As[s][ty][k] * Bs[s][k][tx];
        __syncthreads();
    }
    C[row * n + col] = acc;
}
