// features: tma_bulk_copy, smem_tiling, coalesced_access
// case: 2-D tiles through a CUtensorMap into a two-slot ring with mbarriers; each tile waited for before use,
// the next not issued ahead: no overlap, so not double buffering.
#include <cuda.h>
#include <cstdint>
#define STAGES 2
__global__ void tma_consume(const __grid_constant__ CUtensorMap map, float* out, int ntiles) {
    __shared__ alignas(128) float tile[STAGES][64][64];
    __shared__ alignas(8) uint64_t bar[STAGES];
    if (threadIdx.x == 0)
        for (int s = 0; s < STAGES; ++s)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"((unsigned)__cvta_generic_to_shared(&bar[s])));
    asm volatile("fence.proxy.async.shared::cta;");
    __syncthreads();
    float acc = 0.f;
    for (int t = 0; t < ntiles; ++t) {
        int s = t % STAGES;
        unsigned b = (unsigned)__cvta_generic_to_shared(&bar[s]);
        if (threadIdx.x == 0) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(64 * 64 * 4));
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                         :: "r"((unsigned)__cvta_generic_to_shared(&tile[s][0][0])), "l"(&map), "r"(0), "r"(t * 64), "r"(b) : "memory");
        }
        unsigned done = 0;
        while (!done)
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                         : "=r"(done) : "r"(b), "r"((t / STAGES) & 1));
        for (int k = 0; k < 64; ++k) acc += tile[s][k][threadIdx.x % 64];
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
