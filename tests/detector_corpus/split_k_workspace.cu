// features: split_k, coalesced_access
// case: split-K into a workspace of partial products, then a deterministic reduction kernel.
__global__ void partial_products(const float* A, const float* B, float* ws, int M, int N, int K, int splits) {
    int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y;
    int kc = (K + splits - 1) / splits, kbeg = blockIdx.z * kc, kend = min(K, kbeg + kc);
    if (col >= N) return;
    float s = 0.f;
    for (int k = kbeg; k < kend; ++k) s += A[row * K + k] * B[k * N + col];
    ws[((size_t)blockIdx.z * M + row) * N + col] = s;
}
__global__ void reduce_splits(const float* ws, float* C, int MN, int splits) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= MN) return;
    float s = 0.f;
    for (int z = 0; z < splits; ++z) s += ws[(size_t)z * MN + i];
    C[i] = s;
}
