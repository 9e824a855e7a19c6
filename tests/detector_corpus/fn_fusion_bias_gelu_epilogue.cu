// features: kernel_fusion, coalesced_access, readonly_cache
// case: matrix product with bias and GELU applied to the accumulator before the store, a fused epilogue
// in a kernel not named "fused" (issue 13: fusion was recognised by the name only).
__global__ void linear_gelu(const float* __restrict__ X, const float* __restrict__ W, const float* __restrict__ bias,
                            float* __restrict__ Y, int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y;
    if (col >= N || row >= M) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += X[row * K + k] * W[k * N + col];
    float v = acc + bias[col];
    Y[row * N + col] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}
