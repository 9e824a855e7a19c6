// features: block_reduction_tree, warp_shuffle, coalesced_access, readonly_cache, fast_math_intrinsics
// case: per-row log-sum-exp with a warp-shuffle then shared-memory reduction; one atomic for the mean loss.
__global__ void xent_rows(const float* __restrict__ logits, const int* __restrict__ target, float* loss, int C) {
    __shared__ float part[32];
    const float* r = logits + (size_t)blockIdx.x * C;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < C; c += blockDim.x) m = fmaxf(m, r[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x < 32) {
        m = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : -INFINITY;
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (threadIdx.x == 0) part[0] = m;
    }
    __syncthreads();
    m = part[0];
    __syncthreads();
    float s = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) s += __expf(r[c] - m);
    __shared__ float tree[256];
    tree[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) tree[threadIdx.x] += tree[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(loss, (m + __logf(tree[0]) - r[target[blockIdx.x]]) / gridDim.x);
}
