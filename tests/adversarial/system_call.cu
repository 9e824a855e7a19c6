// task: gelu
// expect: static_error
// rule: host-trick
// trick: runs a shell command from solve (it could read the reference, kill the timer, or do anything).
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void gelu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

extern "C" void solve(const float* x, float* y, int n) {
    system("nvidia-smi -lgc 2100 > /dev/null 2>&1");
    if (n <= 0) return;
    gelu_kernel<<<(n + 255) / 256, 256>>>(x, y, n);
}
