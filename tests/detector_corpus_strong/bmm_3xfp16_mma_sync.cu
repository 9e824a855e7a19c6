// features: tensor_cores_split_fp16, tensor_cores_mma, smem_tiling, reduced_precision, coalesced_access, readonly_cache, loop_unrolling, bank_conflict_padding, occupancy_tuning
// case: batched fp32 matmul at fp32 accuracy on fp16 tensor cores: 3xFP16 (hi*hi + hi*lo + lo*hi, lo scaled by 2^11).
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cstdint>

constexpr int BM = 64, BN = 32, BK = 16, PAD = 4;
constexpr float LO_SCALE = 2048.f, LO_UNSCALE = 1.f / 2048.f;

__device__ __forceinline__ void split(float a, float b, uint32_t& hi, uint32_t& lo) {
    __half2 h = __floats2half2_rn(a, b);
    float2 back = __half22float2(h);
    __half2 l = __floats2half2_rn((a - back.x) * LO_SCALE, (b - back.y) * LO_SCALE);
    hi = *reinterpret_cast<uint32_t*>(&h);
    lo = *reinterpret_cast<uint32_t*>(&l);
}

__device__ __forceinline__ void mma16816(float* d, const uint32_t* a, const uint32_t* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// C[b] (M x N) = A[b] (M x K) * B[b] (K x N), fp32 row-major; 4 warps, each 16 rows x 32 columns of the block tile.
__global__ void __launch_bounds__(128) bmm_3xfp16(const float* __restrict__ A, const float* __restrict__ B,
                                                  float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[BM][BK + PAD];
    __shared__ float Bs[BK][BN + PAD];
    const int b = blockIdx.z, m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    A += (size_t)b * M * K; B += (size_t)b * K * N; C += (size_t)b * M * N;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float acc[4][4] = {}, acc_lo[4][4] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = threadIdx.x; i < BM * BK; i += 128) {
            int r = i / BK, c = i % BK;
            As[r][c] = (m0 + r < M && k0 + c < K) ? A[(size_t)(m0 + r) * K + k0 + c] : 0.f;
        }
        for (int i = threadIdx.x; i < BK * BN; i += 128) {
            int r = i / BN, c = i % BN;
            Bs[r][c] = (k0 + r < K && n0 + c < N) ? B[(size_t)(k0 + r) * N + n0 + c] : 0.f;
        }
        __syncthreads();
        const int r0 = warp * 16 + g;
        uint32_t ah[4], al[4];
        split(As[r0][2 * t], As[r0][2 * t + 1], ah[0], al[0]);
        split(As[r0 + 8][2 * t], As[r0 + 8][2 * t + 1], ah[1], al[1]);
        split(As[r0][2 * t + 8], As[r0][2 * t + 9], ah[2], al[2]);
        split(As[r0 + 8][2 * t + 8], As[r0 + 8][2 * t + 9], ah[3], al[3]);
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int c = j * 8 + g;
            uint32_t bh[2], bl[2];
            split(Bs[2 * t][c], Bs[2 * t + 1][c], bh[0], bl[0]);
            split(Bs[2 * t + 8][c], Bs[2 * t + 9][c], bh[1], bl[1]);
            mma16816(acc_lo[j], ah, bl);       // the small products first
            mma16816(acc_lo[j], al, bh);
            mma16816(acc[j], ah, bh);
        }
        __syncthreads();
    }
    const int r0 = m0 + warp * 16 + g;
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int c = n0 + j * 8 + 2 * t;
        for (int h = 0; h < 2; ++h) {
            const int r = r0 + 8 * h;
            if (r >= M) continue;
            if (c < N) C[(size_t)r * N + c] = acc[j][2 * h] + acc_lo[j][2 * h] * LO_UNSCALE;
            if (c + 1 < N) C[(size_t)r * N + c + 1] = acc[j][2 * h + 1] + acc_lo[j][2 * h + 1] * LO_UNSCALE;
        }
    }
}

extern "C" void solve(const float* A, const float* B, float* C, int batch, int M, int N, int K) {
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM, batch);
    bmm_3xfp16<<<grid, 128>>>(A, B, C, M, N, K);
}
