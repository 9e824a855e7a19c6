// features: thread_block_clusters, smem_tiling, cp_async, double_buffering, register_blocking, loop_unrolling, vector_loads, coalesced_access, readonly_cache, occupancy_tuning
// case: all-pairs softened gravity for n = 65536 fp32 bodies: each thread holds two target bodies, source bodies stream through a double-buffered cp.async shared tile, the source range is split over a cluster of 4 blocks that share the same targets, and the partial accelerations are summed deterministically through distributed shared memory.
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <stdint.h>

namespace cg = cooperative_groups;

namespace {

constexpr int THREADS = 256;
constexpr int IPT     = 2;                       // target bodies per thread
constexpr int BODIES  = THREADS * IPT;           // targets per block (and per cluster)
constexpr int TILE    = THREADS;                 // source bodies per shared tile (one 16-byte copy per thread)
constexpr int JSPLIT  = 4;                       // cluster size: source range split four ways

__device__ __forceinline__ void cp_async16_zfill(void* smem, const void* gmem, bool valid)
{
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    const int bytes = valid ? 16 : 0;            // 0: zero-fill (mass 0 bodies contribute nothing)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(s), "l"(gmem), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }

__device__ __forceinline__ void interact(const float4 p, const float4 q, float& ax, float& ay, float& az, float eps2)
{
    const float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
    const float r2 = fmaf(dx, dx, fmaf(dy, dy, fmaf(dz, dz, eps2)));
    const float inv = rsqrtf(r2);
    const float s = q.w * (inv * inv * inv);
    ax = fmaf(dx, s, ax); ay = fmaf(dy, s, ay); az = fmaf(dz, s, az);
}

// grid (ceil(n / BODIES), JSPLIT); the JSPLIT blocks of a cluster share the targets and split the sources
__global__ void __cluster_dims__(1, JSPLIT, 1) __launch_bounds__(THREADS, 4)
nbody_kernel(const float4* __restrict__ pm,      // (x, y, z, mass)
             float4* __restrict__ acc,           // (ax, ay, az, 0)
             int n, float eps2, float G)
{
    __shared__ __align__(16) float4 tile[2][TILE];
    __shared__ __align__(16) float4 part[BODIES];
    cg::cluster_group cluster = cg::this_cluster();
    const unsigned rank = cluster.block_rank();

    const int tid = threadIdx.x;
    const int i0 = blockIdx.x * BODIES + tid;
    const int i1 = i0 + THREADS;
    const float4 p0 = i0 < n ? __ldg(pm + i0) : make_float4(0.f, 0.f, 0.f, 0.f);
    const float4 p1 = i1 < n ? __ldg(pm + i1) : make_float4(0.f, 0.f, 0.f, 0.f);
    float a0x = 0.f, a0y = 0.f, a0z = 0.f, a1x = 0.f, a1y = 0.f, a1z = 0.f;

    // this block's share of the source tiles
    const int ntiles = (n + TILE - 1) / TILE;
    const int per = (ntiles + JSPLIT - 1) / JSPLIT;
    const int t0 = rank * per;
    const int t1 = min(ntiles, t0 + per);

    if (t0 < t1) {
        const int j = t0 * TILE + tid;
        cp_async16_zfill(&tile[0][tid], pm + (j < n ? j : 0), j < n);
    }
    cp_async_commit();

    for (int t = t0, cur = 0; t < t1; ++t, cur ^= 1) {
        if (t + 1 < t1) {                                     // prefetch the next tile into the other stage
            const int j = (t + 1) * TILE + tid;
            cp_async16_zfill(&tile[cur ^ 1][tid], pm + (j < n ? j : 0), j < n);
        }
        cp_async_commit();
        cp_async_wait<1>();                                   // the current tile has landed
        __syncthreads();
#pragma unroll 16
        for (int k = 0; k < TILE; ++k) {
            const float4 q = tile[cur][k];                    // broadcast read, reused for both targets
            interact(p0, q, a0x, a0y, a0z, eps2);
            interact(p1, q, a1x, a1y, a1z, eps2);
        }
        __syncthreads();                                      // stage may be refilled next iteration
    }

    part[tid]           = make_float4(a0x, a0y, a0z, 0.f);
    part[tid + THREADS] = make_float4(a1x, a1y, a1z, 0.f);
    cluster.sync();

    // block `rank` sums its slice of the targets over the JSPLIT partials (fixed order: deterministic)
    constexpr int SLICE = BODIES / JSPLIT;
    if (tid < SLICE) {
        const int li = rank * SLICE + tid;
        float sx = 0.f, sy = 0.f, sz = 0.f;
#pragma unroll
        for (int r = 0; r < JSPLIT; ++r) {
            const float4* remote = cluster.map_shared_rank(part, r);
            const float4 v = remote[li];
            sx += v.x; sy += v.y; sz += v.z;
        }
        const int i = blockIdx.x * BODIES + li;
        if (i < n) acc[i] = make_float4(G * sx, G * sy, G * sz, 0.f);
    }
    cluster.sync();                                           // keep shared memory alive for remote readers
}

} // namespace

// acc[i] = G * sum_j m_j (x_j - x_i) / (|x_j - x_i|^2 + eps^2)^(3/2); pm[i] = (x, y, z, m).
extern "C" cudaError_t nbody_accelerations(const float4* d_pm, float4* d_acc, int n,
                                           float softening, float G, cudaStream_t stream)
{
    if (n <= 0) return cudaSuccess;
    dim3 grid((n + BODIES - 1) / BODIES, JSPLIT);
    nbody_kernel<<<grid, THREADS, 0, stream>>>(d_pm, d_acc, n, softening * softening, G);
    return cudaGetLastError();
}
