// task: gelu
// expect: wrong_answer
// held_out: true
// trick: correct only for the sizes a prompt shows (the visible correctness shapes and the benchmark
//        size, hard-coded); on any other size it writes zeros. Only the held-out shapes, which prompts
//        never show, catch it: the first failing case must be a held-out one.
#include <cuda_runtime.h>

__global__ void gelu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

__global__ void zeros(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.0f;
}

extern "C" void solve(const float* x, float* y, int n) {
    if (n <= 0) return;
    const int seen[] = {1, 31, 1000, 65537, 4194304, 67108864};
    bool known = false;
    for (int s : seen) known = known || (n == s);
    if (known) gelu_kernel<<<(n + 255) / 256, 256>>>(x, y, n);
    else zeros<<<(n + 255) / 256, 256>>>(y, n);
}
