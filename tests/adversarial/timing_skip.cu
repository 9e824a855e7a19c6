// task: gelu
// expect: wrong_answer
// needs: timing
// trick: special-cases the benchmark shape (n = 67108864, never a correctness shape): there it computes
//        only the first half of y, so it looks ~2x faster than honest code while staying above the
//        speed-of-light bound (no "suspect" flag). Only a correctness check at the benchmark shape
//        (revalidation after timing) catches it.
#include <cuda_runtime.h>

__global__ void gelu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

extern "C" void solve(const float* x, float* y, int n) {
    if (n <= 0) return;
    int work = (n == 67108864) ? n / 2 : n;
    gelu_kernel<<<(work + 255) / 256, 256>>>(x, y, work);
}
