// arch: sm_90a
// features: wgmma, reduced_precision, smem_tiling, coalesced_access
// case: a warpgroup issuing wgmma on shared-memory descriptors (Hopper), inputs converted to half.
#include <cuda_fp16.h>
#include <cstdint>
__device__ uint64_t make_desc(const void* p) {
    uint64_t a = (uint64_t)__cvta_generic_to_shared(p);
    return ((a & 0x3FFFF) >> 4) | ((uint64_t)(128 >> 4) << 16) | ((uint64_t)(256 >> 4) << 32);
}
__global__ void wgmma_tile(const float* A, const float* B, float* C) {
    __shared__ __align__(128) __half sa[64 * 16], sb[16 * 8];
    for (int i = threadIdx.x; i < 64 * 16; i += 128) {
        int m = i / 16, k = i % 16;
        sa[(m / 8) * 128 + (k / 8) * 64 + (m % 8) * 8 + k % 8] = __float2half(A[i]);
    }
    for (int i = threadIdx.x; i < 128; i += 128) {
        int k = i / 8, n = i % 8;
        sb[(k / 8) * 64 + n * 8 + k % 8] = __float2half(B[i]);
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    uint64_t da = make_desc(sa), db = make_desc(sb);
    asm volatile("wgmma.fence.sync.aligned;");
    asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, %4, %5, 1, 1, 1, 0, 0;"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(da), "l"(db));
    asm volatile("wgmma.commit_group.sync.aligned;");
    asm volatile("wgmma.wait_group.sync.aligned 0;");
    int w = threadIdx.x / 32, g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
    C[(w * 16 + g) * 8 + 2 * t] = d0; C[(w * 16 + g) * 8 + 2 * t + 1] = d1;
    C[(w * 16 + g + 8) * 8 + 2 * t] = d2; C[(w * 16 + g + 8) * 8 + 2 * t + 1] = d3;
}
