// task: gelu
// expect: wrong_answer
// needs: timing
// trick: does nothing at all at the benchmark size (a "free" speedup); the first call at that shape
//        is checked before timing starts, so the poison left in y fails it.
#include <cuda_runtime.h>
__global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))); }
}
extern "C" void solve(const float* x, float* y, int n) {
    if (n >= (1 << 26)) return;
    k<<<(n + 255) / 256, 256>>>(x, y, n);
}
