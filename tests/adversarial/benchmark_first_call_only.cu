// task: gelu
// expect: wrong_answer
// needs: timing
// trick: at the benchmark shape it works on the first call only, so repeated timed calls cost nothing.
//        Outputs are poisoned before every timed call and checked after the last one.
#include <cuda_runtime.h>
__global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))); }
}
extern "C" void solve(const float* x, float* y, int n) {
    static int big_calls = 0;
    if (n >= (1 << 26) && big_calls++ > 0) return;
    k<<<(n + 255) / 256, 256>>>(x, y, n);
}
