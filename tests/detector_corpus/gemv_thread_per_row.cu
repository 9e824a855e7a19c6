// features: none
// case: naive GEMV, one thread per row: strided, uncoalesced reads.
__global__ void gemv_rows(const float* A, const float* x, float* y, int M, int N) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= M) return;
    float s = 0.f;
    for (int c = 0; c < N; ++c) s += A[(size_t)r * N + c] * x[c];
    y[r] = s;
}
