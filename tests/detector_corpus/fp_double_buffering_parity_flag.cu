// features: coalesced_access
// case: a Jacobi sweep that flips a parity flag with `p ^= 1` between two global buffers: no shared stages,
// nothing overlaps (issue 13: double_buffering fired on `x ^= 1`).
__global__ void jacobi_steps(float* a, float* b, int n, int steps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int p = 0;
    for (int s = 0; s < steps; ++s) {
        const float* src = p ? b : a;
        float* dst = p ? a : b;
        if (i > 0 && i < n - 1) dst[i] = 0.5f * (src[i - 1] + src[i + 1]);
        p ^= 1;
    }
}
