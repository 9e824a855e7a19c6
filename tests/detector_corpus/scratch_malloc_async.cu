// features: stream_ordered_alloc, coalesced_access, warp_shuffle
// case: per-call scratch from cudaMallocAsync instead of cudaMalloc.
#include <cuda_runtime.h>
__global__ void warp_sums(const float* x, float* part, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.f;
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    if ((threadIdx.x & 31) == 0) part[i / 32] = v;
}
extern "C" void solve(const float* x, float* out, int n) {
    float* part;
    cudaMallocAsync((void**)&part, ((n + 31) / 32) * sizeof(float), 0);
    warp_sums<<<(n + 255) / 256, 256>>>(x, part, n);
    cudaMemcpyAsync(out, part, sizeof(float), cudaMemcpyDeviceToDevice, 0);
    cudaFreeAsync(part, 0);
}
