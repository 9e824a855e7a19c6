// features: tensor_cores_split_fp16, tensor_cores_mma, reduced_precision
// case: fp32 GEMM at fp32 accuracy on fp16 mma.sync: each operand split into an fp16 high part and its scaled residual.
#include <cuda_fp16.h>
#include <cstdint>

__device__ __forceinline__ uint32_t pack(__half a, __half b) {
    __half2 h = __halves2half2(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
}

// one warp per 16 x 8 tile of C; A row-major M x K, B column-major (N x K); K a multiple of 16
__global__ void gemm_split_fp16(const float* A, const float* Bt, float* C, int M, int N, int K) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int m0 = blockIdx.y * 16, n0 = blockIdx.x * 8;
    float big[4] = {0.f, 0.f, 0.f, 0.f}, small[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k = 0; k < K; k += 16) {
        uint32_t ahi[4], alo[4], bhi[2], blo[2];
        for (int r = 0; r < 4; ++r) {
            const int row = m0 + g + (r & 1) * 8, col = k + 2 * t + (r >> 1) * 8;
            __half h0 = __float2half_rn(A[row * K + col]), h1 = __float2half_rn(A[row * K + col + 1]);
            ahi[r] = pack(h0, h1);
            alo[r] = pack(__float2half_rn((A[row * K + col] - __half2float(h0)) * 2048.f),
                          __float2half_rn((A[row * K + col + 1] - __half2float(h1)) * 2048.f));
        }
        for (int r = 0; r < 2; ++r) {
            const int col = k + 2 * t + r * 8, n = n0 + g;
            __half h0 = __float2half_rn(Bt[n * K + col]), h1 = __float2half_rn(Bt[n * K + col + 1]);
            bhi[r] = pack(h0, h1);
            blo[r] = pack(__float2half_rn((Bt[n * K + col] - __half2float(h0)) * 2048.f),
                          __float2half_rn((Bt[n * K + col + 1] - __half2float(h1)) * 2048.f));
        }
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(small[0]), "+f"(small[1]), "+f"(small[2]), "+f"(small[3])
                     : "r"(ahi[0]), "r"(ahi[1]), "r"(ahi[2]), "r"(ahi[3]), "r"(blo[0]), "r"(blo[1]));
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(small[0]), "+f"(small[1]), "+f"(small[2]), "+f"(small[3])
                     : "r"(alo[0]), "r"(alo[1]), "r"(alo[2]), "r"(alo[3]), "r"(bhi[0]), "r"(bhi[1]));
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(big[0]), "+f"(big[1]), "+f"(big[2]), "+f"(big[3])
                     : "r"(ahi[0]), "r"(ahi[1]), "r"(ahi[2]), "r"(ahi[3]), "r"(bhi[0]), "r"(bhi[1]));
    }
    for (int r = 0; r < 4; ++r) {
        const int row = m0 + g + (r >> 1) * 8, col = n0 + 2 * t + (r & 1);
        if (row < M && col < N) C[row * N + col] = big[r] + small[r] * (1.f / 2048.f);
    }
}
