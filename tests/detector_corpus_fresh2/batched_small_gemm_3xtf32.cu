// features: tensor_cores_mma, tensor_cores_3xtf32, cp_async, double_buffering, vector_loads, bank_conflict_padding, smem_tiling, readonly_cache, persistent_kernel, launch_config_tuning, occupancy_tuning, cache_hints, loop_unrolling, coalesced_access
// case: 1M independent 16x16x16 fp32 GEMMs at fp32 accuracy: a persistent grid whose warps each own one matrix product per step, streaming A and B through a per-warp 4-stage cp.async ring into padded shared tiles and computing C with 3xTF32 mma.sync m16n8k8.
#include <cuda_runtime.h>
#include <stdint.h>

constexpr int WARPS = 4;
constexpr int THREADS = WARPS * 32;
constexpr int NSTAGE = 4;
constexpr int LDA = 20;   // 16 + 4 pad: A fragment reads (row g, col t) hit 32 distinct banks
constexpr int LDB = 24;   // 16 + 8 pad: B fragment reads (row t, col g) hit 32 distinct banks
constexpr int A_ELEMS = 16 * LDA;
constexpr int B_ELEMS = 16 * LDB;
constexpr int STAGE_ELEMS = A_ELEMS + B_ELEMS;

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

__device__ __forceinline__ uint32_t f2tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ void split_tf32(float x, uint32_t& big, uint32_t& small) {
    big = f2tf32(x);
    small = f2tf32(x - __uint_as_float(big));
}
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// issue the 2 KB of one (A, B) pair into a stage: 16 cp.async of 16 B per lane-row
__device__ __forceinline__ void load_pair(float* st, const float* __restrict__ A,
                                          const float* __restrict__ B, long long mat, int lane) {
    const float* a = A + mat * 256;
    const float* b = B + mat * 256;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        int chunk = lane + i * 32;          // 64 chunks of 16 B
        int row = chunk >> 2, c = (chunk & 3) * 4;
        cp_async16(st + row * LDA + c, a + row * 16 + c);
        cp_async16(st + A_ELEMS + row * LDB + c, b + row * 16 + c);
    }
}

// A, B, C: [batch][16][16] row-major; C = A * B.
__global__ void __launch_bounds__(THREADS, 4)
batched_gemm16_3xtf32(const float* __restrict__ A, const float* __restrict__ B,
                      float* __restrict__ C, long long batch)
{
    __shared__ __align__(16) float smem[WARPS][NSTAGE][STAGE_ELEMS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const long long ngroups = (batch + WARPS - 1) / WARPS;
    float (*ring)[STAGE_ELEMS] = smem[warp];

    // block-level persistent loop: group q holds matrices q*WARPS .. q*WARPS+WARPS-1
    auto mat_of = [&](long long q) { return q * WARPS + warp; };
    long long q = blockIdx.x;
#pragma unroll
    for (int s = 0; s < NSTAGE - 1; ++s) {
        long long qq = q + (long long)s * gridDim.x;
        if (qq < ngroups && mat_of(qq) < batch) load_pair(ring[s], A, B, mat_of(qq), lane);
        cp_async_commit();
    }
    int stage = 0;
    for (; q < ngroups; q += gridDim.x) {
        // prefetch NSTAGE-1 groups ahead into the stage freed last iteration
        {
            long long qn = q + (long long)(NSTAGE - 1) * gridDim.x;
            int sn = (stage + NSTAGE - 1) % NSTAGE;
            if (qn < ngroups && mat_of(qn) < batch) load_pair(ring[sn], A, B, mat_of(qn), lane);
            cp_async_commit();
        }
        cp_async_wait<NSTAGE - 1>();
        __syncwarp();
        const long long mat = mat_of(q);
        if (mat < batch) {
            const float* sa = ring[stage];
            const float* sb = ring[stage] + A_ELEMS;
            float acc[2][4];
#pragma unroll
            for (int n = 0; n < 2; ++n)
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[n][i] = 0.f;
#pragma unroll
            for (int k0 = 0; k0 < 16; k0 += 8) {
                uint32_t ab[4], as[4];
                split_tf32(sa[g * LDA + k0 + t], ab[0], as[0]);
                split_tf32(sa[(g + 8) * LDA + k0 + t], ab[1], as[1]);
                split_tf32(sa[g * LDA + k0 + t + 4], ab[2], as[2]);
                split_tf32(sa[(g + 8) * LDA + k0 + t + 4], ab[3], as[3]);
#pragma unroll
                for (int n = 0; n < 2; ++n) {
                    uint32_t bb[2], bs[2];
                    split_tf32(sb[(k0 + t) * LDB + n * 8 + g], bb[0], bs[0]);
                    split_tf32(sb[(k0 + t + 4) * LDB + n * 8 + g], bb[1], bs[1]);
                    mma_tf32(acc[n], as, bb);   // small terms first
                    mma_tf32(acc[n], ab, bs);
                    mma_tf32(acc[n], ab, bb);
                }
            }
            float* c = C + mat * 256;
#pragma unroll
            for (int n = 0; n < 2; ++n) {
                __stcs(reinterpret_cast<float2*>(c + g * 16 + n * 8 + 2 * t), make_float2(acc[n][0], acc[n][1]));
                __stcs(reinterpret_cast<float2*>(c + (g + 8) * 16 + n * 8 + 2 * t), make_float2(acc[n][2], acc[n][3]));
            }
        }
        __syncwarp();                       // stage may be refilled next iteration
        stage = (stage + 1) % NSTAGE;
    }
    cp_async_wait<0>();
}

extern "C" void batched_small_gemm_3xtf32(const float* A, const float* B, float* C,
                                          long long batch, cudaStream_t stream)
{
    static int grid = 0;
    if (grid == 0) {
        int dev = 0, sms = 0, per_sm = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, batched_gemm16_3xtf32, THREADS, 0);
        grid = sms * (per_sm > 0 ? per_sm : 1);
    }
    long long ngroups = (batch + WARPS - 1) / WARPS;
    int g = (int)(ngroups < grid ? ngroups : grid);
    if (g < 1) return;
    batched_gemm16_3xtf32<<<g, THREADS, 0, stream>>>(A, B, C, batch);
}
