// features: coalesced_access, warp_shuffle, warp_per_row
// case: one warp per row of a row-sum; the lane reaches the index only through `tid & 31`, an alias of
// the thread index, and the loop counter is a size_t.
__global__ void row_sums_warp(const float* x, float* y, int rows, int cols) {
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int row = blockIdx.x * (blockDim.x / 32) + tid / 32;
    if (row >= rows) return;
    float s = 0.f;
    for (size_t c = lane; c < (size_t)cols; c += 32) s += x[(size_t)row * cols + c];
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) y[row] = s;
}
