// task: gelu
// expect: runtime_error
// reason: the candidate ended the worker process
// trick: calls exit(3) from solve(), which would end any harness that runs candidates in its own process.
#include <cuda_runtime.h>
#include <stdlib.h>

extern "C" void solve(const float* x, float* y, int n) {
    exit(3);
}
