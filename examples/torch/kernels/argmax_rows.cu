// argmax along each row, an int64 output: one warp per row, a tie to the smaller column (torch.argmax's
// rule). NaN inputs are not handled (PyTorch would return the NaN's index); the task's inputs have none.
#include <cuda_runtime.h>

__global__ void argmax_rows(const float* __restrict__ x, long long* __restrict__ out, int rows, int cols) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const float* r = x + (size_t)row * cols;
    float best = 0.0f;
    int at = cols;                      // cols: this lane has seen no element
    for (int c = lane; c < cols; c += 32) {
        float v = r[c];
        if (at == cols || v > best) { best = v; at = c; }
    }
    for (int off = 16; off > 0; off >>= 1) {
        float ob = __shfl_down_sync(0xffffffffu, best, off);
        int oa = __shfl_down_sync(0xffffffffu, at, off);
        if (oa != cols && (at == cols || ob > best || (ob == best && oa < at))) { best = ob; at = oa; }
    }
    if (lane == 0) out[row] = (long long)at;
}

extern "C" void solve(const float* x, long long* out, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    int warps = 8;
    argmax_rows<<<(rows - 1) / warps + 1, warps * 32>>>(x, out, rows, cols);
}
