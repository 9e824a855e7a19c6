// Naive baseline ("scalar CSR"): one thread per row walks its entries and sums vals * x[col].
// Long rows leave the rest of their warp idle and neighbouring threads read different rows.
#include <cuda_runtime.h>

__global__ void spmv_kernel(const int* row_ptr, const int* col_idx, const float* vals, const float* x,
                            float* y, int M) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M) return;
    float acc = 0.0f;
    for (int k = row_ptr[i]; k < row_ptr[i + 1]; ++k) acc += vals[k] * x[col_idx[k]];
    y[i] = acc;
}

extern "C" void solve(const int* row_ptr, const int* col_idx, const float* vals, const float* x, float* y,
                      int M, int N, int nnz) {
    if (M <= 0) return;
    int threads = 256;
    int blocks = (M + threads - 1) / threads;
    spmv_kernel<<<blocks, threads>>>(row_ptr, col_idx, vals, x, y, M);
}
