// features: tma_bulk_copy, single_pass_row, block_reduction_tree, warp_shuffle, kernel_fusion, coalesced_access, readonly_cache, occupancy_tuning
// case: LayerNorm with the row brought into shared memory by one cp.async.bulk (TMA, 1-D) completing on an mbarrier.
#include <cuda_runtime.h>
#include <cstdint>

constexpr int THREADS = 256, MAX_COLS = 8192;

__device__ __forceinline__ float block_sum(float v, float* red) {
    for (int o = 16; o; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = threadIdx.x < THREADS / 32 ? red[threadIdx.x] : 0.f;
    if (warp == 0) for (int o = 16; o; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) red[0] = v;
    __syncthreads();
    v = red[0];
    __syncthreads();
    return v;
}

__global__ void __launch_bounds__(THREADS) layernorm_bulk(const float* __restrict__ x, const float* __restrict__ g,
                                                          const float* __restrict__ b, float* __restrict__ y, int cols, float eps) {
    __shared__ __align__(128) float row[MAX_COLS];
    __shared__ __align__(8) uint64_t bar;
    __shared__ float red[32];
    const uint32_t sbar = (uint32_t)__cvta_generic_to_shared(&bar);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sbar));
        asm volatile("fence.mbarrier_init.release.cluster;");
        const uint32_t bytes = cols * sizeof(float);                          // cols % 4 == 0
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(sbar), "r"(bytes));
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     :: "r"((uint32_t)__cvta_generic_to_shared(row)), "l"(x + (size_t)blockIdx.x * cols), "r"(bytes),
                        "r"(sbar) : "memory");
    }
    __syncthreads();
    asm volatile("{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n@!p bra W;\n}\n" :: "r"(sbar));
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += THREADS) s += row[c];
    const float mean = block_sum(s, red) / cols;
    float q = 0.f;
    for (int c = threadIdx.x; c < cols; c += THREADS) { float d = row[c] - mean; q += d * d; }
    const float rstd = rsqrtf(block_sum(q, red) / cols + eps);
    float* yr = y + (size_t)blockIdx.x * cols;
    for (int c = threadIdx.x; c < cols; c += THREADS) yr[c] = (row[c] - mean) * rstd * g[c] + b[c];
}

extern "C" void solve(const float* x, const float* g, const float* b, float* y, int rows, int cols) {
    layernorm_bulk<<<rows, THREADS>>>(x, g, b, y, cols, 1e-5f);
}
