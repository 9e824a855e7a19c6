// features: thread_block_clusters, cooperative_groups, block_reduction_tree, coalesced_access
// case: a cluster of 4 blocks combining their partial sums through distributed shared memory.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void __cluster_dims__(4, 1, 1) cluster_row_sum(const float* x, float* y, int cols) {
    __shared__ float part[256];
    cg::cluster_group cluster = cg::this_cluster();
    int rank = cluster.block_rank();
    const float* r = x + (size_t)(blockIdx.x / 4) * cols;
    float s = 0.f;
    for (int c = rank * 256 + threadIdx.x; c < cols; c += 4 * 256) s += r[c];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
        __syncthreads();
    }
    cluster.sync();
    if (rank == 0 && threadIdx.x == 0) {
        float t = 0.f;
        for (int b = 0; b < 4; ++b) t += *cluster.map_shared_rank(&part[0], b);
        y[blockIdx.x / 4] = t;
    }
    cluster.sync();
}
