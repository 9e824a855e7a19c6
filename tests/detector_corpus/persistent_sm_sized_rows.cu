// features: persistent_kernel, launch_config_tuning, warp_shuffle, block_reduction_tree, coalesced_access
// case: a grid of (SM count x blocks per SM) blocks looping over rows: row sums by shuffles and a 32-slot block reduction.
#include <cuda_runtime.h>
__global__ void row_sums_persistent(const float* x, float* y, int rows, int cols) {
    __shared__ float ws[32];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        float s = 0.f;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) s += x[(size_t)r * cols + c];
        for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
        if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = s;
        __syncthreads();
        if (threadIdx.x == 0) {
            float t = 0.f;
            for (int w = 0; w < (int)blockDim.x / 32; ++w) t += ws[w];
            y[r] = t;
        }
        __syncthreads();
    }
}
void launch_rows(const float* x, float* y, int rows, int cols) {
    int dev, sms, per_sm;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, row_sums_persistent, 256, 0);
    row_sums_persistent<<<sms * per_sm, 256>>>(x, y, rows, cols);
}
