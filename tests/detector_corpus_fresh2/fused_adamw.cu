// features: cooperative_groups, kernel_fusion, grid_stride_loop, readonly_cache, block_reduction_tree, warp_shuffle, vector_loads, coalesced_access, cache_hints, loop_unrolling, launch_config_tuning, occupancy_tuning, fast_math_intrinsics, stream_ordered_alloc
// case: One AdamW step over 256M fp32 parameters with global grad-norm clipping in a single cooperative launch: a device-sized grid-stride pass sums grad squares (float4, shuffles + 32-slot block reduction, one partial per block), grid.sync(), every block sums the partials deterministically into the clip factor, then a float4 grid-stride pass updates p, m, v with streaming loads and stores.
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <stdint.h>

namespace cg = cooperative_groups;

constexpr int THREADS = 512;

struct AdamWArgs {
    float* p; const float* g; float* m; float* v;
    float* partials;            // [gridDim.x]
    long long n;
    float lr, beta1, beta2, eps, weight_decay, max_norm;
    float bc1, bc2;             // 1 - beta1^t, 1 - beta2^t
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float block_sum(float v, float* red) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    v = warp_sum(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < (int)(blockDim.x >> 5) ? red[lane] : 0.f;
        w = warp_sum(w);
        if (lane == 0) red[32] = w;
    }
    __syncthreads();
    float r = red[32];
    __syncthreads();            // red may be reused
    return r;
}

__device__ __forceinline__ void adamw_one(float& p, float g, float& m, float& v, float clip,
                                          const AdamWArgs& a, float step_size, float decay) {
    g *= clip;
    m = fmaf(a.beta1, m, (1.f - a.beta1) * g);
    v = fmaf(a.beta2, v, (1.f - a.beta2) * g * g);
    const float denom = sqrtf(v / a.bc2) + a.eps;
    p = p * decay - step_size * __fdividef(m, denom);
}

__global__ void __launch_bounds__(THREADS, 2)
fused_adamw_kernel(AdamWArgs a)
{
    __shared__ float red[33];
    cg::grid_group grid = cg::this_grid();
    const long long n4 = a.n >> 2;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long t0 = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const float4* __restrict__ g4 = reinterpret_cast<const float4*>(a.g);

    // phase 1: sum of squared gradients
    float s0 = 0.f, s1 = 0.f;
    long long i = t0;
    for (; i + stride < n4; i += 2 * stride) {
        float4 x = __ldcg(g4 + i), y = __ldcg(g4 + i + stride);
        s0 += x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w;
        s1 += y.x * y.x + y.y * y.y + y.z * y.z + y.w * y.w;
    }
    for (; i < n4; i += stride) {
        float4 x = __ldcg(g4 + i);
        s0 += x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w;
    }
    for (long long k = (n4 << 2) + t0; k < a.n; k += stride) s0 += a.g[k] * a.g[k];
    const float bs = block_sum(s0 + s1, red);
    if (threadIdx.x == 0) a.partials[blockIdx.x] = bs;

    grid.sync();

    // every block reduces the partials in the same order: identical clip factor everywhere
    float ps = 0.f;
    for (int b = threadIdx.x; b < (int)gridDim.x; b += blockDim.x) ps += __ldcg(a.partials + b);
    const float total = block_sum(ps, red);
    const float norm = sqrtf(total);
    const float clip = fminf(1.f, a.max_norm / (norm + 1e-6f));

    // phase 2: AdamW update
    const float step_size = a.lr / a.bc1;
    const float decay = 1.f - a.lr * a.weight_decay;
    float4* __restrict__ p4 = reinterpret_cast<float4*>(a.p);
    float4* __restrict__ m4 = reinterpret_cast<float4*>(a.m);
    float4* __restrict__ v4 = reinterpret_cast<float4*>(a.v);
#pragma unroll 2
    for (long long j = t0; j < n4; j += stride) {
        float4 p = __ldcs(p4 + j), g = __ldcs(g4 + j), m = __ldcs(m4 + j), v = __ldcs(v4 + j);
        adamw_one(p.x, g.x, m.x, v.x, clip, a, step_size, decay);
        adamw_one(p.y, g.y, m.y, v.y, clip, a, step_size, decay);
        adamw_one(p.z, g.z, m.z, v.z, clip, a, step_size, decay);
        adamw_one(p.w, g.w, m.w, v.w, clip, a, step_size, decay);
        __stcs(p4 + j, p); __stcs(m4 + j, m); __stcs(v4 + j, v);
    }
    for (long long k = (n4 << 2) + t0; k < a.n; k += stride)
        adamw_one(a.p[k], a.g[k], a.m[k], a.v[k], clip, a, step_size, decay);
}

// step: 1-based step count. Pointers 16-byte aligned (cudaMalloc).
extern "C" void fused_adamw(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                            long long n, float lr, float beta1, float beta2, float eps,
                            float weight_decay, float max_grad_norm, int step, cudaStream_t stream)
{
    static int grid = 0;
    if (grid == 0) {
        int dev = 0, sms = 0, per_sm = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_adamw_kernel, THREADS, 0);
        grid = sms * (per_sm > 0 ? per_sm : 1);          // all blocks co-resident for grid.sync
    }
    AdamWArgs a;
    a.p = params; a.g = grads; a.m = exp_avg; a.v = exp_avg_sq;
    a.n = n; a.lr = lr; a.beta1 = beta1; a.beta2 = beta2; a.eps = eps;
    a.weight_decay = weight_decay; a.max_norm = max_grad_norm;
    a.bc1 = 1.f - powf(beta1, (float)step);
    a.bc2 = 1.f - powf(beta2, (float)step);
    cudaMallocAsync(&a.partials, sizeof(float) * grid, stream);
    void* args[] = {&a};
    cudaLaunchCooperativeKernel((void*)fused_adamw_kernel, dim3(grid), dim3(THREADS), args, 0, stream);
    cudaFreeAsync(a.partials, stream);
}
