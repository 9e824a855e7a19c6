// features: occupancy_tuning, coalesced_access
// case: a register cap with __maxnreg__ and a shared-memory carveout preference set on the host.
#include <cuda_runtime.h>
__global__ void __maxnreg__(64) polynomial(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = ((0.3f * v + 0.2f) * v + 0.1f) * v + 1.f; }
}
void launch_polynomial(const float* x, float* y, int n) {
    cudaFuncSetAttribute(polynomial, cudaFuncAttributePreferredSharedMemoryCarveout, 0);
    polynomial<<<(n + 255) / 256, 256>>>(x, y, n);
}
