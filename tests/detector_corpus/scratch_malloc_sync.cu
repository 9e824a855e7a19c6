// features: coalesced_access, block_reduction_tree
// case: scratch from cudaMalloc / cudaFree in every call (what stream-ordered allocation replaces).
#include <cuda_runtime.h>
__global__ void block_sum(const float* x, float* part, int n) {
    __shared__ float s[128];
    int i = blockIdx.x * 128 + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    for (int k = 64; k > 0; k /= 2) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = s[0];
}
extern "C" void solve(const float* x, float* part_out, int n) {
    float* part;
    cudaMalloc(&part, ((n + 127) / 128) * sizeof(float));
    block_sum<<<(n + 127) / 128, 128>>>(x, part, n);
    cudaMemcpy(part_out, part, sizeof(float), cudaMemcpyDeviceToDevice);
    cudaFree(part);
}
