// task: gelu
// expect: wrong_answer
// trick: correct everywhere except one element per block, which gets NaN (0/0). NaN compares false
//        with everything, so a check written as `abs(got - want) > tol` would let it through; NaN and Inf
//        must never pass.
#include <cuda_runtime.h>

__global__ void gelu_nan(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        float r = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        if (threadIdx.x == 0) {
            float zero = v - v;
            r = zero / zero;
        }
        y[i] = r;
    }
}

extern "C" void solve(const float* x, float* y, int n) {
    if (n <= 0) return;
    gelu_nan<<<(n + 255) / 256, 256>>>(x, y, n);
}
