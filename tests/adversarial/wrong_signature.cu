// task: gelu
// expect: static_error
// rule: signature
// trick: the entry point takes a double* output and a size_t count: it would read garbage through the
//        harness's float/int arguments. The exact signature is checked before compiling.
#include <cuda_runtime.h>

__global__ void gelu_kernel(const float* x, double* y, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) {
        double v = x[i];
        y[i] = 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    }
}

extern "C" void solve(const float* x, double* y, size_t n) {
    gelu_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x, y, n);
}
