// Naive baseline: one thread per output row, looping over the row (neighbouring threads read
// neighbouring rows, so the loads of a warp are not coalesced).
#include <cuda_runtime.h>

__global__ void gemv_kernel(const float* A, const float* x, float* y, int M, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M) return;
    const float* a = A + (size_t)i * N;
    float acc = 0.0f;
    for (int j = 0; j < N; ++j) acc += a[j] * x[j];
    y[i] = acc;
}

extern "C" void solve(const float* A, const float* x, float* y, int M, int N) {
    if (M <= 0) return;
    int threads = 256;
    int blocks = (M + threads - 1) / threads;
    gemv_kernel<<<blocks, threads>>>(A, x, y, M, N);
}
