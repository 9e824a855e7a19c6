// features: thread_block_clusters, cooperative_groups, block_reduction_tree, warp_shuffle, kernel_fusion, grid_stride_loop, vector_loads, coalesced_access, readonly_cache, cache_hints, loop_unrolling, launch_config_tuning, occupancy_tuning, stream_ordered_alloc
// case: Sum of 256M floats in one launch: a grid of 8-block clusters sized by cudaOccupancyMaxActiveClusters grid-strides over float4s with 4 loads in flight, reduces each block with shuffles and a 32-slot shared array, gathers the cluster's block sums from distributed shared memory in rank 0, and the last cluster to take an atomic ticket (after __threadfence) adds the cluster partials in double in a fixed order.
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <stdint.h>

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kCluster = 8;
constexpr int kUnroll = 4;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__global__ void __launch_bounds__(kThreads, 4)
sum_cluster_kernel(const float* __restrict__ x, size_t n, bool vec_ok, double* __restrict__ partials,
                   unsigned int* __restrict__ ticket, float* __restrict__ result) {
    cg::cluster_group cluster = cg::this_cluster();
    __shared__ float s_warp[kWarps];
    __shared__ float s_block;

    const size_t tid = (size_t)blockIdx.x * kThreads + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * kThreads;
    float acc[kUnroll] = {0.f, 0.f, 0.f, 0.f};
    size_t done = 0;
    if (vec_ok) {
        const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
        const size_t n4 = n >> 2;
        size_t i = tid;
        for (; i + (kUnroll - 1) * stride < n4; i += kUnroll * stride) {
            float4 v[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(x4 + i + u * stride);
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) acc[u] += (v[u].x + v[u].y) + (v[u].z + v[u].w);
        }
        for (; i < n4; i += stride) {
            const float4 v = __ldcs(x4 + i);
            acc[0] += (v.x + v.y) + (v.z + v.w);
        }
        done = n4 << 2;
    }
    for (size_t i = done + tid; i < n; i += stride) acc[1] += __ldcs(x + i);
    float v = (acc[0] + acc[1]) + (acc[2] + acc[3]);

    // Block: shuffles, then the 32-slot shared array read by warp 0.
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) s_warp[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = (lane < kWarps) ? s_warp[lane] : 0.f;
        t = warp_sum(t);
        if (lane == 0) s_block = t;
    }

    // Cluster: rank 0 reads every block's sum from distributed shared memory.
    cluster.sync();                                        // all s_block written
    const unsigned rank = cluster.block_rank();
    const unsigned csize = cluster.num_blocks();
    double cv = 0.0;
    if (rank == 0 && warp == 0 && lane < (int)csize) cv = (double)*cluster.map_shared_rank(&s_block, lane);
    cluster.sync();                                        // remote reads done: blocks may exit

    if (rank == 0 && warp == 0) {
        cv = warp_sum_d(cv);
        const unsigned cid = blockIdx.x / csize;
        const unsigned nclusters = gridDim.x / csize;
        unsigned last = 0;
        if (lane == 0) {
            partials[cid] = cv;
            __threadfence();                               // partial visible before the ticket
            last = (atomicAdd(ticket, 1u) == nclusters - 1);
        }
        last = __shfl_sync(0xffffffffu, last, 0);
        if (last) {
            __threadfence();
            double s = 0.0;
            for (unsigned c = lane; c < nclusters; c += 32) s += __ldcg(partials + c);   // fixed order
            s = warp_sum_d(s);
            if (lane == 0) {
                *result = (float)s;
                *ticket = 0u;                              // ready for the next call
            }
        }
    }
}

double* g_partials = nullptr;      // scratch kept across calls: cluster partials, then the ticket
size_t g_partials_cap = 0;

}  // namespace

// *result = sum(x[0..n)), one kernel launch. Not safe for concurrent calls (shared scratch).
extern "C" cudaError_t sum_cluster_dsmem(const float* x, size_t n, float* result, cudaStream_t stream) {
    static int max_clusters = 0;
    if (!max_clusters) {
        int dev, sms;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaLaunchConfig_t q = {};
        q.gridDim = dim3(kCluster * sms);
        q.blockDim = dim3(kThreads);
        cudaLaunchAttribute a[1];
        a[0].id = cudaLaunchAttributeClusterDimension;
        a[0].val.clusterDim.x = kCluster;
        a[0].val.clusterDim.y = 1;
        a[0].val.clusterDim.z = 1;
        q.attrs = a;
        q.numAttrs = 1;
        int nc = 0;
        if (cudaOccupancyMaxActiveClusters(&nc, sum_cluster_kernel, &q) != cudaSuccess || nc <= 0) {
            cudaGetLastError();
            nc = sms / kCluster > 0 ? sms / kCluster : 1;
        }
        max_clusters = nc;                                 // one full wave of clusters
    }
    // Fewer clusters for small inputs (at least ~16 float4 per thread).
    const size_t per_cluster = (size_t)kCluster * kThreads * 4 * 16;
    size_t want = (n + per_cluster - 1) / per_cluster;
    if (want < 1) want = 1;
    const int clusters = (int)(want < (size_t)max_clusters ? want : (size_t)max_clusters);

    if ((size_t)clusters > g_partials_cap) {
        if (g_partials) cudaFree(g_partials);
        const size_t cap = (size_t)max_clusters;
        cudaError_t e = cudaMalloc(&g_partials, (cap + 1) * sizeof(double));
        if (e != cudaSuccess) { g_partials = nullptr; g_partials_cap = 0; return e; }
        cudaMemsetAsync(g_partials + cap, 0, sizeof(double), stream);   // ticket starts at 0
        g_partials_cap = cap;
    }
    unsigned int* ticket = reinterpret_cast<unsigned int*>(g_partials + g_partials_cap);

    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(clusters * kCluster);
    cfg.blockDim = dim3(kThreads);
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = kCluster;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const bool vec_ok = (reinterpret_cast<uintptr_t>(x) & 15) == 0;
    return cudaLaunchKernelEx(&cfg, sum_cluster_kernel, x, n, vec_ok, g_partials, ticket, result);
}
