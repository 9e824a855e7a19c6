// features: warp_per_row, warp_shuffle, kernel_fusion, coalesced_access, readonly_cache
// case: layer norm with a warp per row and a Welford (count, mean, M2) merge across lanes; two reads.
__global__ void layernorm_welford(const float* __restrict__ x, const float* __restrict__ g, const float* __restrict__ b,
                                  float* __restrict__ y, int rows, int cols) {
    int row = (blockIdx.x * blockDim.x + threadIdx.x) / warpSize;
    int lane = threadIdx.x % warpSize;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * cols;
    float n = 0.f, mean = 0.f, m2 = 0.f;
    for (int c = lane; c < cols; c += warpSize) {
        float v = xr[c];
        n += 1.f;
        float d = v - mean;
        mean += d / n;
        m2 += d * (v - mean);
    }
    for (int o = 16; o > 0; o >>= 1) {
        float n_o = __shfl_xor_sync(0xffffffffu, n, o), mean_o = __shfl_xor_sync(0xffffffffu, mean, o);
        float m2_o = __shfl_xor_sync(0xffffffffu, m2, o);
        float tot = n + n_o;
        if (tot > 0.f) {
            float d = mean_o - mean;
            mean += d * n_o / tot;
            m2 += m2_o + d * d * n * n_o / tot;
        }
        n = tot;
    }
    float rstd = rsqrtf(m2 / cols + 1e-5f);
    for (int c = lane; c < cols; c += warpSize) y[(size_t)row * cols + c] = (xr[c] - mean) * rstd * g[c] + b[c];
}
