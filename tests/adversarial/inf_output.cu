// task: gelu
// expect: wrong_answer
// trick: writes every element, but one in 97 is +Inf. Inf never passes where the reference is finite.
#include <cuda_runtime.h>
__global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = (i % 97 == 0) ? __int_as_float(0x7f800000) : 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))); }
}
extern "C" void solve(const float* x, float* y, int n) { k<<<(n + 255) / 256, 256>>>(x, y, n); }
