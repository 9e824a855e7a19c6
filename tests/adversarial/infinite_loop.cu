// task: gelu
// expect: timeout
// trick: the kernel never ends (a spin on volatile memory that the compiler may not remove). The worker
//        must be killed at the time limit and the NEXT evaluation in the same process must pass.
#include <cuda_runtime.h>

__global__ void spin(float* y) {
    volatile float* p = y;
    for (;;) {
        p[0] = p[0] + 1.0f;
    }
}

extern "C" void solve(const float* x, float* y, int n) {
    (void)x; (void)n;
    spin<<<1, 1>>>(y);
}
