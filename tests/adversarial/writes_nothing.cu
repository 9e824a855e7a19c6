// task: gelu
// expect: wrong_answer
// trick: solve returns without writing y. Without output poisoning, a buffer that still holds the
//        answer of an earlier call (or of the reference) would pass; the harness fills y with NaN first.
#include <cuda_runtime.h>

extern "C" void solve(const float* x, float* y, int n) {
    (void)x; (void)y; (void)n;
}
