// task: gelu
// expect: wrong_answer
// trick: a plausible but wrong formula (the erf-free "sigmoid GELU" x * sigmoid(1.702 x)), off by up to
//        ~2% of the value, far outside the 1e-4 relative tolerance.
#include <cuda_runtime.h>

__global__ void gelu_wrong(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = v / (1.0f + __expf(-1.702f * v));
    }
}

extern "C" void solve(const float* x, float* y, int n) {
    if (n <= 0) return;
    gelu_wrong<<<(n + 255) / 256, 256>>>(x, y, n);
}
