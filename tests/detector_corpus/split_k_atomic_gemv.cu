// features: split_k, coalesced_access, readonly_cache
// case: a tall-skinny product split along K over blockIdx.y slices, combined with atomics.
__global__ void gemv_t_split(const float* __restrict__ A, const float* __restrict__ x, float* y, int K, int N, int slice) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    int k_begin = blockIdx.y * slice, k_end = min(K, k_begin + slice);
    if (n >= N) return;
    float s = 0.f;
    for (int k = k_begin; k < k_end; ++k) s += A[(size_t)k * N + n] * x[k];
    atomicAdd(&y[n], s);
}
