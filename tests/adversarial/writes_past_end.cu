// task: gelu
// expect: wrong_answer
// trick: none intended: the classic `i <= n` bound, one store past the end of y. The allocation is
//        rounded up, so no CUDA fault happens and every output is right; only the guard bytes the
//        harness places after each buffer see the overrun (in a real program it corrupts a neighbour).
#include <cuda_runtime.h>

__global__ void gelu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) {
        float v = i < n ? x[i] : 0.0f;
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

extern "C" void solve(const float* x, float* y, int n) {
    if (n <= 0) return;
    gelu_kernel<<<(n + 256) / 256, 256>>>(x, y, n);
}
