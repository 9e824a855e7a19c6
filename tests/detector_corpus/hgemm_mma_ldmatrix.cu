// features: tensor_cores_mma, smem_tiling, bank_conflict_padding, reduced_precision, coalesced_access
// case: mma.sync m16n8k16 fed by ldmatrix from padded shared tiles; the A tile converted from fp32 to half.
#include <cuda_fp16.h>
#include <cstdint>
#define PAD 8
__global__ void warp_tile_mma(const float* A32, const __half* B, float* C, int K) {
    __shared__ __align__(16) __half As[16][16 + PAD];
    __shared__ __align__(16) __half Bs[16][8 + PAD];
    int lane = threadIdx.x;
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k0 = 0; k0 < K; k0 += 16) {
        for (int i = lane; i < 256; i += 32) As[i / 16][i % 16] = __float2half(A32[(i / 16) * K + k0 + i % 16]);
        for (int i = lane; i < 128; i += 32) Bs[i / 8][i % 8] = B[(k0 + i / 8) * 8 + i % 8];
        __syncwarp();
        uint32_t a[4], b[2];
        unsigned pa = (unsigned)__cvta_generic_to_shared(&As[(lane & 7) + ((lane >> 3) & 1) * 8][(lane >> 4) * 8]);
        unsigned pb = (unsigned)__cvta_generic_to_shared(&Bs[lane & 15][0]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(pa));
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(b[0]), "=r"(b[1]) : "r"(pb));
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
        __syncwarp();
    }
    int g = lane >> 2, t = lane & 3;
    C[g * 8 + 2 * t] = d[0]; C[g * 8 + 2 * t + 1] = d[1]; C[(g + 8) * 8 + 2 * t] = d[2]; C[(g + 8) * 8 + 2 * t + 1] = d[3];
}
