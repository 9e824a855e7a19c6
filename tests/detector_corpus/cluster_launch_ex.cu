// features: thread_block_clusters, coalesced_access
// case: a cluster size chosen at launch with cudaLaunchKernelEx instead of __cluster_dims__.
#include <cuda_runtime.h>
__global__ void scaled(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 3.f * x[i];
}
void launch_clustered(const float* x, float* y, int n) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = (n + 255) / 256;
    cfg.blockDim = 256;
    cudaLaunchAttribute a[1];
    a[0].id = cudaLaunchAttributeClusterDimension;
    a[0].val.clusterDim.x = 2; a[0].val.clusterDim.y = 1; a[0].val.clusterDim.z = 1;
    cfg.attrs = a;
    cfg.numAttrs = 1;
    cudaLaunchKernelEx(&cfg, scaled, x, y, n);
}
