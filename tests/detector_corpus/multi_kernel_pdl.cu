// features: programmatic_dependent_launch, coalesced_access
// case: a two-kernel solve where the second kernel is launched programmatically and waits on the first.
#include <cuda_runtime.h>
__global__ void partial_max(const float* x, float* m, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) m[i] = fabsf(x[i]);
}
__global__ void divide_by(const float* x, const float* m, float* y, int n) {
    cudaGridDependencySynchronize();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / (1.0f + m[i]);
}
extern "C" void solve(const float* x, float* m, float* y, int n) {
    partial_max<<<(n + 255) / 256, 256>>>(x, m, n);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = (n + 255) / 256;
    cfg.blockDim = 256;
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &at;
    cfg.numAttrs = 1;
    cudaLaunchKernelEx(&cfg, divide_by, x, (const float*)m, y, n);
}
