// task: gelu
// expect: wrong_answer
// reason: input
// trick: computes y correctly but then writes into the const input x (casting const away). The output
//        check alone passes; the harness must compare x with its copy after the call ("input modified").
#include <cuda_runtime.h>

__global__ void gelu_clobber(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        const_cast<float*>(x)[i] = 0.0f;   // scratch space "reuse"
    }
}

extern "C" void solve(const float* x, float* y, int n) {
    if (n <= 0) return;
    gelu_clobber<<<(n + 255) / 256, 256>>>(x, y, n);
}
