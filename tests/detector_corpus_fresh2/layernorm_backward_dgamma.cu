// features: coalesced_access, vector_loads, readonly_cache, cache_hints, loop_unrolling, split_k, programmatic_dependent_launch, stream_ordered_alloc
// case: LayerNorm backward dgamma/dbeta (column sums of dy*xhat and dy over 16384x4096) as a deterministic two-kernel split reduction: float4 column strips over row slices write partials, a PDL-launched second kernel sums them.
#include <cuda_runtime.h>
#include <stdint.h>

constexpr int THREADS = 128;          // each thread owns 4 adjacent columns (one float4)
constexpr int ROWS_PER_SPLIT = 128;   // rows reduced by one block
constexpr int UNROLL = 8;

// x, dy: [rows][cols]; mean, rstd: [rows]; partials: [nsplit][cols] x 2
__global__ void __launch_bounds__(THREADS)
ln_bwd_dgamma_partial(const float* __restrict__ x, const float* __restrict__ dy,
                      const float* __restrict__ mean, const float* __restrict__ rstd,
                      float* __restrict__ part_g, float* __restrict__ part_b,
                      int rows, int cols)
{
    const int c4 = blockIdx.x * THREADS + threadIdx.x;          // float4 column index
    const int split = blockIdx.y;
    const int r0 = split * ROWS_PER_SPLIT;
    const int r1 = min(rows, r0 + ROWS_PER_SPLIT);
    const int ncol4 = cols >> 2;
    if (c4 >= ncol4) return;

    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
    const float4* __restrict__ d4 = reinterpret_cast<const float4*>(dy);

    float4 sg = make_float4(0.f, 0.f, 0.f, 0.f), sb = sg;
    int r = r0;
    for (; r + UNROLL <= r1; r += UNROLL) {
        float4 xv[UNROLL], dv[UNROLL];
        float mu[UNROLL], rs[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            size_t off = (size_t)(r + u) * ncol4 + c4;
            xv[u] = __ldcs(x4 + off);           // streamed once: evict first
            dv[u] = __ldcs(d4 + off);
            mu[u] = __ldg(mean + r + u);
            rs[u] = __ldg(rstd + r + u);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            float4 xh;
            xh.x = (xv[u].x - mu[u]) * rs[u];
            xh.y = (xv[u].y - mu[u]) * rs[u];
            xh.z = (xv[u].z - mu[u]) * rs[u];
            xh.w = (xv[u].w - mu[u]) * rs[u];
            sg.x = fmaf(dv[u].x, xh.x, sg.x); sg.y = fmaf(dv[u].y, xh.y, sg.y);
            sg.z = fmaf(dv[u].z, xh.z, sg.z); sg.w = fmaf(dv[u].w, xh.w, sg.w);
            sb.x += dv[u].x; sb.y += dv[u].y; sb.z += dv[u].z; sb.w += dv[u].w;
        }
    }
    for (; r < r1; ++r) {
        size_t off = (size_t)r * ncol4 + c4;
        float4 xv = __ldcs(x4 + off), dv = __ldcs(d4 + off);
        float mu = __ldg(mean + r), rs = __ldg(rstd + r);
        sg.x = fmaf(dv.x, (xv.x - mu) * rs, sg.x); sg.y = fmaf(dv.y, (xv.y - mu) * rs, sg.y);
        sg.z = fmaf(dv.z, (xv.z - mu) * rs, sg.z); sg.w = fmaf(dv.w, (xv.w - mu) * rs, sg.w);
        sb.x += dv.x; sb.y += dv.y; sb.z += dv.z; sb.w += dv.w;
    }
    reinterpret_cast<float4*>(part_g)[(size_t)split * ncol4 + c4] = sg;
    reinterpret_cast<float4*>(part_b)[(size_t)split * ncol4 + c4] = sb;
    // let the finishing kernel start its launch while the tail of this grid drains
    cudaTriggerProgrammaticLaunchCompletion();
}

__global__ void __launch_bounds__(256)
ln_bwd_dgamma_finish(const float* __restrict__ part_g, const float* __restrict__ part_b,
                     float* __restrict__ dgamma, float* __restrict__ dbeta, int nsplit, int cols)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    cudaGridDependencySynchronize();      // partials of the previous kernel are visible after this
    if (c >= cols) return;
    float g0 = 0.f, g1 = 0.f, b0 = 0.f, b1 = 0.f;
    int s = 0;
#pragma unroll 4
    for (; s + 2 <= nsplit; s += 2) {
        g0 += __ldcg(part_g + (size_t)s * cols + c);
        b0 += __ldcg(part_b + (size_t)s * cols + c);
        g1 += __ldcg(part_g + (size_t)(s + 1) * cols + c);
        b1 += __ldcg(part_b + (size_t)(s + 1) * cols + c);
    }
    for (; s < nsplit; ++s) {
        g0 += __ldcg(part_g + (size_t)s * cols + c);
        b0 += __ldcg(part_b + (size_t)s * cols + c);
    }
    dgamma[c] = g0 + g1;
    dbeta[c]  = b0 + b1;
}

// cols must be a multiple of 4 and the pointers 16-byte aligned (cudaMalloc'd).
extern "C" void layernorm_backward_dgamma(const float* x, const float* dy, const float* mean,
                                          const float* rstd, float* dgamma, float* dbeta,
                                          int rows, int cols, cudaStream_t stream)
{
    const int nsplit = (rows + ROWS_PER_SPLIT - 1) / ROWS_PER_SPLIT;
    float* part = nullptr;
    cudaMallocAsync(&part, sizeof(float) * 2 * (size_t)nsplit * cols, stream);
    float* part_g = part;
    float* part_b = part + (size_t)nsplit * cols;

    dim3 grid((cols / 4 + THREADS - 1) / THREADS, nsplit);
    ln_bwd_dgamma_partial<<<grid, THREADS, 0, stream>>>(x, dy, mean, rstd, part_g, part_b, rows, cols);

    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((cols + 255) / 256);
    cfg.blockDim = dim3(256);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    cudaLaunchKernelEx(&cfg, ln_bwd_dgamma_finish, (const float*)part_g, (const float*)part_b,
                       dgamma, dbeta, nsplit, cols);
    cudaFreeAsync(part, stream);
}
