// features: warp_per_row, online_softmax, warp_shuffle, coalesced_access, readonly_cache, kernel_fusion, fast_math_intrinsics
// case: a typical optimized softmax: a warp per row, online max and sum, shuffles, output pass.
__global__ void softmax_warp(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (warp >= rows) return;
    const float* row = x + (size_t)warp * cols;
    float mx = -INFINITY, sum = 0.f;
    for (int c = lane; c < cols; c += 32) {
        float v = row[c];
        if (v > mx) { sum *= __expf(mx - v); mx = v; }
        sum += __expf(v - mx);
    }
    for (int off = 16; off > 0; off /= 2) {
        float omx = __shfl_xor_sync(0xffffffff, mx, off);
        float osum = __shfl_xor_sync(0xffffffff, sum, off);
        float nmx = fmaxf(mx, omx);
        sum = sum * __expf(mx - nmx) + osum * __expf(omx - nmx);
        mx = nmx;
    }
    for (int c = lane; c < cols; c += 32) y[(size_t)warp * cols + c] = __expf(row[c] - mx) / sum;
}
