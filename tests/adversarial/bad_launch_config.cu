// task: gelu
// expect: runtime_error
// reason: a kernel launch in solve() failed
// trick: launches 2048 threads per block, over the limit of 1024, and never checks the launch. No kernel
//        runs; the harness must say why (the launch error) instead of only "the output was never written".
#include <cuda_runtime.h>
#include <math.h>

__global__ void gelu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
}

extern "C" void solve(const float* x, float* y, int n) {
    gelu_kernel<<<(n + 2047) / 2048, 2048>>>(x, y, n);
}
