// features: tensor_cores_3xtf32, tensor_cores_mma
// arch: sm_80
// case: 3xTF32 with mma.sync where the residual is formed against the bit-masked big part:
// `to_tf32(x - __uint_as_float(big))`, a spelling the old rule did not know.
__device__ __forceinline__ unsigned to_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ void mma_tf32(float* d, const unsigned* a, const unsigned* b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// One warp computes a 16 x 8 tile of C = A (16 x K, row-major) * B (K x 8, column-major).
__global__ void sgemm_3xtf32_tile(const float* A, const float* B, float* C, int K) {
    const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k = 0; k < K; k += 8) {
        float av[4] = {A[g * K + k + t], A[(g + 8) * K + k + t], A[g * K + k + t + 4], A[(g + 8) * K + k + t + 4]};
        float bv[2] = {B[(k + t) + g * K], B[(k + t + 4) + g * K]};
        unsigned ab[4], as[4], bb[2], bs[2];
        for (int i = 0; i < 4; ++i) {
            ab[i] = to_tf32(av[i]);
            as[i] = to_tf32(av[i] - __uint_as_float(ab[i]));
        }
        for (int i = 0; i < 2; ++i) {
            bb[i] = to_tf32(bv[i]);
            bs[i] = to_tf32(bv[i] - __uint_as_float(bb[i]));
        }
        mma_tf32(acc, as, bb);
        mma_tf32(acc, ab, bs);
        mma_tf32(acc, ab, bb);
    }
    C[g * 8 + t * 2] = acc[0];
    C[g * 8 + t * 2 + 1] = acc[1];
    C[(g + 8) * 8 + t * 2] = acc[2];
    C[(g + 8) * 8 + t * 2 + 1] = acc[3];
}
