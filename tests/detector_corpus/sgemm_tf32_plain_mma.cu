// features: tensor_cores_mma
// case: plain TF32 mma.sync on fp32 inputs converted with cvt.rna.tf32: no residual split, not 3xTF32.
#include <cstdint>
__device__ uint32_t to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}
__global__ void mma_tf32_16x8x8(const float* A, const float* B, float* C) {
    int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    uint32_t a0 = to_tf32(A[g * 8 + t]), a1 = to_tf32(A[(g + 8) * 8 + t]);
    uint32_t a2 = to_tf32(A[g * 8 + t + 4]), a3 = to_tf32(A[(g + 8) * 8 + t + 4]);
    uint32_t b0 = to_tf32(B[t * 8 + g]), b1 = to_tf32(B[(t + 4) * 8 + g]);
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    C[g * 8 + 2 * t] = d0; C[g * 8 + 2 * t + 1] = d1; C[(g + 8) * 8 + 2 * t] = d2; C[(g + 8) * 8 + 2 * t + 1] = d3;
}
