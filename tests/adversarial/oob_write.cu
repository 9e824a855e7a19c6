// task: gelu
// expect: runtime_error
// trick: writes 64 TiB past the end of y: an illegal address (mapped neither on the device nor, through
//        HMM, on the host) that poisons the CUDA context. The harness must report the CUDA error as a
//        runtime_error and the next evaluation must work (worker process).
#include <cuda_runtime.h>

__global__ void gelu_oob(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        if (i == n - 1) y[(size_t)i + ((size_t)1 << 44)] = v;
    }
}

extern "C" void solve(const float* x, float* y, int n) {
    if (n <= 0) return;
    gelu_oob<<<(n + 255) / 256, 256>>>(x, y, n);
}
