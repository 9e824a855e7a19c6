// task: gelu
// expect: wrong_answer
// trick: reduced precision where the task does not allow it: the result goes through half precision
//        (as a half-sized output buffer would), a relative error up to 2^-11 = 4.9e-4, five times the
//        task's rtol 1e-4. The tolerance, not the speed, decides whether precision may be traded.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void gelu_half(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        float r = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        y[i] = __half2float(__float2half(r));
    }
}

extern "C" void solve(const float* x, float* y, int n) {
    if (n <= 0) return;
    gelu_half<<<(n + 255) / 256, 256>>>(x, y, n);
}
