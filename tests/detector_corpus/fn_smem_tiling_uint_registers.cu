// features: smem_tiling, register_blocking, vector_loads, loop_unrolling, coalesced_access, readonly_cache
// case: a 2-D blocktiled SGEMM in the style of public tutorials: `uint` loop counters, the A tile loaded
// as float4 into a register and stored transposed from it (no global load on the store's right side),
// results in a per-thread TM x TN array fed from register caches of the tiles.
#define BM 64
#define BN 64
#define BK 8
#define TM 8
#define TN 8
__global__ void sgemm_2d_blocktiling(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                                     float* __restrict__ C) {
    const uint cRow = blockIdx.y, cCol = blockIdx.x;
    const uint threadCol = threadIdx.x % (BN / TN);
    const uint threadRow = threadIdx.x / (BN / TN);
    __shared__ float As[BK * BM];
    __shared__ float Bs[BK * BN];
    A += cRow * BM * K;
    B += cCol * BN;
    C += cRow * BM * N + cCol * BN;
    const uint innerRowA = threadIdx.x / (BK / 4), innerColA = threadIdx.x % (BK / 4);
    const uint innerRowB = threadIdx.x / (BN / 4), innerColB = threadIdx.x % (BN / 4);
    float threadResults[TM * TN] = {0.0f};
    float regM[TM] = {0.0f};
    float regN[TN] = {0.0f};
    for (uint bkIdx = 0; bkIdx < K; bkIdx += BK) {
        float4 tmp = reinterpret_cast<const float4*>(&A[innerRowA * K + innerColA * 4])[0];
        As[(innerColA * 4 + 0) * BM + innerRowA] = tmp.x;
        As[(innerColA * 4 + 1) * BM + innerRowA] = tmp.y;
        As[(innerColA * 4 + 2) * BM + innerRowA] = tmp.z;
        As[(innerColA * 4 + 3) * BM + innerRowA] = tmp.w;
        reinterpret_cast<float4*>(&Bs[innerRowB * BN + innerColB * 4])[0] =
            reinterpret_cast<const float4*>(&B[innerRowB * N + innerColB * 4])[0];
        __syncthreads();
        A += BK;
        B += BK * N;
        for (uint dotIdx = 0; dotIdx < BK; ++dotIdx) {
#pragma unroll
            for (uint i = 0; i < TM; ++i) regM[i] = As[dotIdx * BM + threadRow * TM + i];
#pragma unroll
            for (uint i = 0; i < TN; ++i) regN[i] = Bs[dotIdx * BN + threadCol * TN + i];
            for (uint resIdxM = 0; resIdxM < TM; ++resIdxM)
                for (uint resIdxN = 0; resIdxN < TN; ++resIdxN)
                    threadResults[resIdxM * TN + resIdxN] += regM[resIdxM] * regN[resIdxN];
        }
        __syncthreads();
    }
    for (uint resIdxM = 0; resIdxM < TM; resIdxM += 1)
        for (uint resIdxN = 0; resIdxN < TN; resIdxN += 1)
            C[(threadRow * TM + resIdxM) * N + threadCol * TN + resIdxN] = threadResults[resIdxM * TN + resIdxN];
}
