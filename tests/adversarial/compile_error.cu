// task: gelu
// expect: compile_error
// trick: none; a typo (undeclared identifier). The condensed error must name the line.
#include <cuda_runtime.h>

__global__ void gelu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.5f * x[i] * (1.0f + tanhf(kSqrt2OverPi * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
}

extern "C" void solve(const float* x, float* y, int n) {
    if (n <= 0) return;
    gelu_kernel<<<(n + 255) / 256, 256>>>(x, y, n);
}
