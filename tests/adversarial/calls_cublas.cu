// task: sgemm
// expect: static_error
// rule: forbidden-library
// trick: lets cuBLAS do the work. A library is a yardstick, never a candidate: refused before compiling.
#include <cublas_v2.h>

extern "C" void solve(const float* A, const float* B, float* C, int M, int N, int K) {
    static cublasHandle_t handle = nullptr;
    if (!handle) cublasCreate(&handle);
    const float one = 1.0f, zero = 0.0f;
    // row-major C = A B  ==  column-major C^T = B^T A^T
    cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, N, A, K, &zero, C, N);
}
