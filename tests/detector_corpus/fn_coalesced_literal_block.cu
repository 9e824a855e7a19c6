// features: coalesced_access
// case: the block size written as a literal inside the subscript (issue 13: missed).
__global__ void scale256(const float* x, float* y, float a) {
    y[blockIdx.x * 256 + threadIdx.x] = a * x[blockIdx.x * 256 + threadIdx.x];
}
