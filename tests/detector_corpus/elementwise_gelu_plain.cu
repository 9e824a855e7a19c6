// features: coalesced_access
// case: the plainest elementwise kernel: one element per thread.
__global__ void gelu(const float* x, float* y, int n) {
    int idx = threadIdx.x + blockIdx.x * blockDim.x;
    if (idx < n) {
        float v = x[idx];
        y[idx] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
}
