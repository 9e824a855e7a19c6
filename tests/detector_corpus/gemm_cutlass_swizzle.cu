// features: block_rasterization, coalesced_access
// case: CUTLASS-style threadblock swizzle of a 2-D grid (log_tile) so neighbouring blocks share operands in L2.
__global__ void gemm_swizzled(const float* A, const float* B, float* C, int M, int N, int K, int log_tile) {
    int bx = blockIdx.x >> log_tile;
    int by = (blockIdx.y << log_tile) + (blockIdx.x & ((1 << log_tile) - 1));
    int col = bx * blockDim.x + threadIdx.x, row = by * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float s = 0.f;
    for (int k = 0; k < K; ++k) s += A[row * K + k] * B[k * N + col];
    C[row * N + col] = s;
}
