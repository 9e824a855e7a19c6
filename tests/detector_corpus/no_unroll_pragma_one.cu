// features: coalesced_access
// case: `#pragma unroll 1` keeps the loop rolled: not unrolling.
__global__ void prefix_row(const float* x, float* y, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float s = 0.f;
#pragma unroll 1
    for (int r = 0; r < 64; ++r) { s += x[r * cols + c]; y[r * cols + c] = s; }
}
