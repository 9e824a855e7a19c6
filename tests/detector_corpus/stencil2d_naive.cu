// features: coalesced_access
// case: 5-point 2-D stencil straight from global memory (the caches do the reuse).
__global__ void stencil5(const float* in, float* out, int H, int W) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < 1 || y < 1 || x >= W - 1 || y >= H - 1) return;
    out[y * W + x] = 0.2f * (in[y * W + x] + in[y * W + x - 1] + in[y * W + x + 1] + in[(y - 1) * W + x] + in[(y + 1) * W + x]);
}
