// Library yardstick: cuBLAS SGEMV. A row-major M x N matrix is the column-major N x M matrix A^T
// (leading dimension N), so y = A x is y = op(A^T) x with op = transpose.
#include <cuda_runtime.h>
#include <cublas_v2.h>

static cublasHandle_t handle() {
    static cublasHandle_t h = nullptr;
    if (h == nullptr) cublasCreate(&h);  // default stream, host pointer mode
    return h;
}

extern "C" void solve(const float* A, const float* x, float* y, int M, int N) {
    if (M <= 0) return;
    if (N <= 0) {
        cudaMemset(y, 0, sizeof(float) * (size_t)M);
        return;
    }
    const float one = 1.0f, zero = 0.0f;
    cublasSgemv(handle(), CUBLAS_OP_T, N, M, &one, A, N, x, 1, &zero, y, 1);
}
