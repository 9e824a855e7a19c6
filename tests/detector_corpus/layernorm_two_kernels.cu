// features: block_reduction_tree, coalesced_access
// case: statistics kernel writes mean and rstd to global memory, a second kernel normalizes: not fused.
__global__ void row_stats(const float* x, float* mean, float* rstd, int cols) {
    __shared__ float s1[256], s2[256];
    const float* r = x + (size_t)blockIdx.x * cols;
    float a = 0.f, b = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) { a += r[c]; b += r[c] * r[c]; }
    s1[threadIdx.x] = a;
    s2[threadIdx.x] = b;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) { s1[threadIdx.x] += s1[threadIdx.x + s]; s2[threadIdx.x] += s2[threadIdx.x + s]; }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        float m = s1[0] / cols;
        mean[blockIdx.x] = m;
        rstd[blockIdx.x] = rsqrtf(s2[0] / cols - m * m + 1e-5f);
    }
}
__global__ void apply_norm(const float* x, const float* mean, const float* rstd, const float* g, const float* b,
                           float* y, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (c < cols && r < rows) y[(size_t)r * cols + c] = (x[(size_t)r * cols + c] - mean[r]) * rstd[r] * g[c] + b[c];
}
