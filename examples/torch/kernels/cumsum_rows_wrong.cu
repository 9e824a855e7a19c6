// Deliberately WRONG (for the tests): an exclusive prefix sum where the module computes an inclusive one.
// Every element is written, so only the comparison with the reference can catch it.
#include <cuda_runtime.h>

__global__ void cumsum_exclusive(const float* __restrict__ x, float* __restrict__ out, int rows, int length) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* r = x + (size_t)row * length;
    float* o = out + (size_t)row * length;
    float acc = 0.0f;
    for (int i = 0; i < length; ++i) {
        o[i] = acc;          // the bug: written before adding r[i]
        acc += r[i];
    }
}

extern "C" void solve(const float* x, float* out, int rows, int length) {
    if (rows <= 0 || length <= 0) return;
    cumsum_exclusive<<<(rows - 1) / 128 + 1, 128>>>(x, out, rows, length);
}
