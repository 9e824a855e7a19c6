// task: sgemm
// expect: wrong_answer
// needs: timing
// trick: memoization keyed by pointer: the first call on a set of buffers (A, B, C, M, N, K) computes C and
//        keeps a copy; while the same buffers come back it copies the kept C (a 64 MB device copy, far
//        cheaper than 2*4096^3 flops). Correct on every correctness case (fresh buffers each time); inside
//        the timing loop other input sets are written into the same buffers, so a checked call of another
//        set gets the first set's answer. The scaled held-out cases catch it before timing: a freed buffer's
//        address comes back for the case scaled to the end of the inputs' range at the same shape, which gets
//        the unscaled case's answer.
#include <cuda_runtime.h>

#define TILE 16

__global__ void sgemm_kernel(const float* A, const float* B, float* C, int M, int N, int K) {
    for (long long i = blockIdx.y * TILE + threadIdx.y; i < M; i += (long long)gridDim.y * TILE) {
        for (long long j = (long long)blockIdx.x * TILE + threadIdx.x; j < N; j += (long long)gridDim.x * TILE) {
            const float* a = A + i * K;
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += a[k] * B[(long long)k * N + j];
            C[i * N + j] = acc;
        }
    }
}

static const float* memo_A = nullptr;
static const float* memo_B = nullptr;
static float* memo_C = nullptr;
static int memo_M = -1, memo_N = -1, memo_K = -1;
static float* kept = nullptr;
static size_t kept_bytes = 0;

extern "C" void solve(const float* A, const float* B, float* C, int M, int N, int K) {
    if (M <= 0 || N <= 0) return;
    size_t bytes = (size_t)M * N * sizeof(float);
    if (kept && A == memo_A && B == memo_B && C == memo_C && M == memo_M && N == memo_N && K == memo_K) {
        cudaMemcpy(C, kept, bytes, cudaMemcpyDeviceToDevice);   // "nothing changed": replay
        return;
    }
    unsigned gx = (unsigned)((N - 1) / TILE + 1);
    unsigned gy = (unsigned)((M - 1) / TILE + 1);
    if (gy > 65535u) gy = 65535u;
    sgemm_kernel<<<dim3(gx, gy), dim3(TILE, TILE)>>>(A, B, C, M, N, K);
    if (bytes > kept_bytes) {
        cudaFree(kept);
        cudaMalloc(&kept, bytes);
        kept_bytes = bytes;
    }
    cudaMemcpy(kept, C, bytes, cudaMemcpyDeviceToDevice);
    memo_A = A; memo_B = B; memo_C = C; memo_M = M; memo_N = N; memo_K = K;
}
