// Naive baseline: one thread per element, 256 threads per block.
#include <cuda_runtime.h>

__global__ void gelu_kernel(const float* x, float* y, int n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

extern "C" void solve(const float* x, float* y, int n) {
    int threads = 256;
    if (n <= 0) return;
    int blocks = (n - 1) / threads + 1;
    gelu_kernel<<<blocks, threads>>>(x, y, n);
}
