// variant: naive-256
#include <cuda_runtime.h>
#include <math.h>
__global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * cols;
    float* yr = y + (size_t)row * cols;
    float m = -INFINITY;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, xr[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += expf(xr[c] - m);
    float inv = 1.0f / s;
    for (int c = 0; c < cols; ++c) yr[c] = expf(xr[c] - m) * inv;
}
extern "C" void solve(const float* x, float* y, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    int threads = 256;
    softmax_rows<<<(rows + threads - 1) / threads, threads>>>(x, y, rows, cols);
}
