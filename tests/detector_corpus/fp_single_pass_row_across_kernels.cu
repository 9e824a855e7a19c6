// features: coalesced_access, warp_shuffle, block_reduction_tree
// case: a three-kernel softmax: a per-thread array is filled in one kernel and a store from an array
// happens in another; no kernel reads a row once and writes it (a match must not span kernels).
__global__ void row_max(const float* x, float* mx, int cols) {
    float part[4];
    float m = -INFINITY;
    for (int i = 0; i < 4; ++i) {
        part[i] = x[(size_t)blockIdx.x * cols + i * blockDim.x + threadIdx.x];
        m = fmaxf(m, part[i]);
    }
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x == 0) mx[blockIdx.x] = m;
}
__global__ void row_sum(const float* x, const float* mx, float* sm, int cols) {
    __shared__ float buf[256];
    float s = 0.f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) s += expf(x[(size_t)blockIdx.x * cols + i] - mx[blockIdx.x]);
    buf[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) buf[threadIdx.x] += buf[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) sm[blockIdx.x] = buf[0];
}
__global__ void normalize(const float* x, const float* mx, const float* sm, float* y, int n, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = expf(x[i] - mx[i / cols]) / sm[i / cols];
}
