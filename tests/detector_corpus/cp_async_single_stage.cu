// features: cp_async, smem_tiling, coalesced_access, readonly_cache
// case: 1-D convolution with its input tile loaded by cp.async, waited for at once (no second stage).
#include <cuda_pipeline.h>
#define BS 256
#define KW 9
__global__ void conv1d_async(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, int n) {
    __shared__ float tile[BS + KW - 1];
    int base = blockIdx.x * BS;
    for (int j = threadIdx.x; j < BS + KW - 1; j += blockDim.x)
        if (base + j < n) __pipeline_memcpy_async(&tile[j], &x[base + j], sizeof(float));
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    int i = base + threadIdx.x;
    if (i + KW - 1 >= n) return;
    float s = 0.f;
    for (int k = 0; k < KW; ++k) s += w[k] * tile[threadIdx.x + k];
    y[i] = s;
}
