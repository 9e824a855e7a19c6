// features: kernel_fusion, cooperative_groups, grid_stride_loop, coalesced_access, warp_shuffle
// case: normalize by the global sum in one cooperative kernel: phase 1 sums, grid.sync(), phase 2 scales.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void normalize_coop(const float* x, float* y, float* total, int n) {
    cg::grid_group grid = cg::this_grid();
    float s = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(total, s);
    grid.sync();
    float inv = 1.0f / *total;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i] * inv;
}
