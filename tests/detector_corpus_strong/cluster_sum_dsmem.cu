// features: thread_block_clusters, cooperative_groups, block_reduction_tree, warp_shuffle, coalesced_access, readonly_cache, occupancy_tuning
// case: row sums of very long rows: a cluster of 8 blocks per row, block sums exchanged through distributed shared memory.
#include <cuda_runtime.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

constexpr int THREADS = 256, CLUSTER = 8;

__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS)
row_sum_cluster(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float warp_sum[THREADS / 32];
    __shared__ float block_sum;
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = cluster.block_rank(), row = blockIdx.y;
    const float* xr = x + (size_t)row * cols;
    float s = 0.f;
    for (int c = rank * THREADS + threadIdx.x; c < cols; c += CLUSTER * THREADS) s += xr[c];
    for (int o = 16; o; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) warp_sum[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float b = 0.f;
        for (int w = 0; w < THREADS / 32; ++w) b += warp_sum[w];
        block_sum = b;
    }
    cluster.sync();
    if (rank == 0 && threadIdx.x == 0) {
        float total = 0.f;
        for (int r = 0; r < CLUSTER; ++r) total += *cluster.map_shared_rank(&block_sum, r);
        y[row] = total;
    }
    cluster.sync();                                 // keep every block's shared memory alive until it was read
}

extern "C" void solve(const float* x, float* y, int rows, int cols) {
    row_sum_cluster<<<dim3(CLUSTER, rows), THREADS>>>(x, y, cols);
}
