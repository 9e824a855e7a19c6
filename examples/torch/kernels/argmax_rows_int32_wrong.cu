// Wrong on purpose: argmax_rows with the int64 output written as 32-bit ints (a kernel written for `int*`).
// The values land, two per element, in the first half of the buffer; the second half keeps the harness's
// 64-bit poison, and the judge must call those elements never written.
#include <cuda_runtime.h>

__global__ void argmax_rows_i32(const float* __restrict__ x, int* __restrict__ out, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* r = x + (size_t)row * cols;
    int at = 0;
    for (int c = 1; c < cols; ++c)
        if (r[c] > r[at]) at = c;
    out[row] = at;
}

extern "C" void solve(const float* x, long long* out, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    argmax_rows_i32<<<(rows + 255) / 256, 256>>>(x, reinterpret_cast<int*>(out), rows, cols);
}
