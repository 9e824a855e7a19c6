// task: gelu
// expect: wrong_answer|suspect
// needs: timing
// trick: returns a result cached from an earlier call: it remembers (x, y, n) of the last call and, when
//        they repeat, skips the work, as if the inputs could not have changed. Repeated timing calls on
//        the same buffers cost nothing (below the speed of light -> suspect), and correctness checked again
//        on fresh inputs (or on a re-poisoned y) after timing sees stale or NaN output -> wrong_answer.
#include <cuda_runtime.h>

__global__ void gelu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

extern "C" void solve(const float* x, float* y, int n) {
    static const float* last_x = nullptr;
    static float* last_y = nullptr;
    static int last_n = -1;
    if (n <= 0) return;
    if (x == last_x && y == last_y && n == last_n) return;   // "memoized"
    last_x = x; last_y = y; last_n = n;
    gelu_kernel<<<(n + 255) / 256, 256>>>(x, y, n);
}
