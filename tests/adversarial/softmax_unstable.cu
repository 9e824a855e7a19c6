// task: softmax
// expect: wrong_answer
// trick: the textbook softmax without subtracting the row maximum. Correct on small values; rows near
//        +100 overflow expf to Inf (Inf/Inf = NaN) and rows near -120 underflow to 0/0. The task's inputs
//        include such rows, and NaN never passes.
#include <cuda_runtime.h>

__global__ void softmax_kernel(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * cols;
    float* yr = y + (size_t)row * cols;
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += expf(xr[c]);
    for (int c = 0; c < cols; ++c) yr[c] = expf(xr[c]) / s;
}

extern "C" void solve(const float* x, float* y, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    softmax_kernel<<<(rows + 127) / 128, 128>>>(x, y, rows, cols);
}
