// features: none
// case: naive transpose: coalesced reads but strided writes (the index is multiplied by the height): not counted.
__global__ void transpose_naive(const float* in, float* out, int h, int w) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < h && c < w) out[(size_t)c * h + r] = in[(size_t)r * w + c];
}
