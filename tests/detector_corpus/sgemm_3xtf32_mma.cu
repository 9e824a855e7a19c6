// features: tensor_cores_mma, tensor_cores_3xtf32
// case: 3xTF32 through mma.sync: each operand split into big + small TF32 parts, three products.
#include <cstdint>
__device__ void split_tf32(float x, uint32_t& big, uint32_t& small) {
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(big) : "f"(x));
    float rest = x - __uint_as_float(big);
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(small) : "f"(rest));
}
__device__ void mma_tf32(float* d, const uint32_t* a, const uint32_t* b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__global__ void mma_3xtf32_16x8x8(const float* A, const float* B, float* C) {
    int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    float av[4] = {A[g * 8 + t], A[(g + 8) * 8 + t], A[g * 8 + t + 4], A[(g + 8) * 8 + t + 4]};
    float bv[2] = {B[t * 8 + g], B[(t + 4) * 8 + g]};
    uint32_t ab[4], as[4], bb[2], bs[2];
    for (int i = 0; i < 4; ++i) split_tf32(av[i], ab[i], as[i]);
    for (int i = 0; i < 2; ++i) split_tf32(bv[i], bb[i], bs[i]);
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    mma_tf32(d, as, bb);
    mma_tf32(d, ab, bs);
    mma_tf32(d, ab, bb);
    C[g * 8 + 2 * t] = d[0]; C[g * 8 + 2 * t + 1] = d[1]; C[(g + 8) * 8 + 2 * t] = d[2]; C[(g + 8) * 8 + 2 * t + 1] = d[3];
}
