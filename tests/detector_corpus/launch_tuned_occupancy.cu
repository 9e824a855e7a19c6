// features: launch_config_tuning, coalesced_access, occupancy_tuning, grid_stride_loop
// case: block size from the occupancy calculator and a grid of whole waves from the SM count.
#include <cuda_runtime.h>
__global__ void __launch_bounds__(512) axpy(const float* x, float* y, float a, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] += a * x[i];
}
void launch_axpy(const float* x, float* y, float a, int n) {
    int min_grid, block, sms, dev;
    cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, axpy, 0, 512);
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    axpy<<<sms * (min_grid / sms), block>>>(x, y, a, n);
}
