// features: coalesced_access
// case: a plain copy named "fused_..." is not fused (issue 13: the name alone made it fusion).
__global__ void fused_copy_kernel(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
}
