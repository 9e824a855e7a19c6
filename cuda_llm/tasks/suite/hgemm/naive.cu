// Naive baseline: one thread per output element, 16x16 threads per block, fp32 accumulation.
#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void hgemm_kernel(const __half* A, const __half* B, float* C, int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        const __half* a = A + (size_t)row * K;
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += __half2float(a[k]) * __half2float(B[(size_t)k * N + col]);
        }
        C[(size_t)row * N + col] = acc;
    }
}

extern "C" void solve(const __half* A, const __half* B, float* C, int M, int N, int K) {
    if (M <= 0 || N <= 0) return;
    dim3 threads(16, 16);
    dim3 blocks((N + 15) / 16, (M + 15) / 16);
    hgemm_kernel<<<blocks, threads>>>(A, B, C, M, N, K);
}
