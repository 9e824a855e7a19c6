// arch: sm_90a
// features: warp_specialization, cp_async, coalesced_access, smem_tiling
// case: one producer warp fills stages with cp.async and signals an mbarrier; consumer warps wait on it
// and read the stage reversed: global data staged in shared memory and read back by other threads.
#include <cuda_pipeline.h>
#include <cstdint>
__global__ void producer_consumer(const float* in, float* out, int tiles) {
    __shared__ float buf[2][256];
    __shared__ alignas(8) uint64_t full[2];
    int warp_id = threadIdx.x / 32;
    if (threadIdx.x == 0)
        for (int s = 0; s < 2; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 32;" :: "r"((unsigned)__cvta_generic_to_shared(&full[s])));
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
        int s = t & 1;
        unsigned bar = (unsigned)__cvta_generic_to_shared(&full[s]);
        if (warp_id == 0) {
            for (int j = threadIdx.x; j < 256; j += 32) __pipeline_memcpy_async(&buf[s][j], &in[t * 256 + j], 4);
            __pipeline_commit();
            __pipeline_wait_prior(0);
            asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
        } else {
            unsigned ok = 0;
            while (!ok)
                asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                             : "=r"(ok) : "r"(bar), "r"((t >> 1) & 1));
            int c = threadIdx.x - 32;
            if (c < 256) out[t * 256 + c] = buf[s][255 - c] * 2.f;
        }
        __syncthreads();
    }
}
