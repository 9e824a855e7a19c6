// task: gelu
// expect: wrong_answer
// trick: the bounds check drops the last element whenever n is not a multiple of the block size (256),
//        so a kernel tested only on power-of-two sizes looks correct. The poisoned y[n-1] stays NaN.
#include <cuda_runtime.h>

__global__ void gelu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int limit = (n % 256 == 0) ? n : n - 1;
    if (i < limit) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

extern "C" void solve(const float* x, float* y, int n) {
    if (n <= 0) return;
    gelu_kernel<<<(n + 255) / 256, 256>>>(x, y, n);
}
