// features: block_reduction_tree, coalesced_access, kernel_fusion
// case: a block per row, max and sum by two shared-memory trees, then the normalized output: three passes.
#define B 256
__global__ void softmax_block(const float* x, float* y, int cols) {
    __shared__ float red[B];
    const float* r = x + (size_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += B) m = fmaxf(m, r[c]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = B / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float sum = 0.f;
    for (int c = threadIdx.x; c < cols; c += B) sum += expf(r[c] - m);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = B / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.f / red[0];
    for (int c = threadIdx.x; c < cols; c += B) y[(size_t)blockIdx.x * cols + c] = expf(r[c] - m) * inv;
}
