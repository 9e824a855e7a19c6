// features: smem_tiling, register_blocking, double_buffering, vector_loads, loop_unrolling, readonly_cache, occupancy_tuning
// case: batched fp32 matmul on CUDA cores: 64 x 64 tiles, 4 x 4 outputs per thread, two shared stages (the next tile
// loaded to registers, then stored to the other stage, while this one is used).
#include <cuda_runtime.h>

constexpr int BM = 64, BN = 64, BK = 8, TM = 4, TN = 4;

__global__ void __launch_bounds__(256) bmm_rb(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                              int M, int N, int K) {
    __shared__ float As[2][BK][BM];      // A stored transposed: k-major
    __shared__ __align__(16) float Bs[2][BK][BN];
    const int b = blockIdx.z, m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    A += (size_t)b * M * K; B += (size_t)b * K * N; C += (size_t)b * M * N;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int ar = threadIdx.x / 4, ac = (threadIdx.x % 4) * 2;          // A: 64 rows x 8 columns, 2 per thread
    const int br = threadIdx.x / 32, bc = (threadIdx.x % 32) * 2;        // B: 8 rows x 64 columns, 2 per thread
    float acc[TM][TN] = {};
    auto load = [&](int k0, float2& a, float2& bb) {
        const int gr = m0 + ar, gk = k0 + ac;
        a.x = gr < M && gk < K ? A[(size_t)gr * K + gk] : 0.f;
        a.y = gr < M && gk + 1 < K ? A[(size_t)gr * K + gk + 1] : 0.f;
        const int hk = k0 + br, gc = n0 + bc;
        bb.x = hk < K && gc < N ? B[(size_t)hk * N + gc] : 0.f;
        bb.y = hk < K && gc + 1 < N ? B[(size_t)hk * N + gc + 1] : 0.f;
    };
    float2 ra, rb;
    load(0, ra, rb);
    As[0][ac][ar] = ra.x; As[0][ac + 1][ar] = ra.y; Bs[0][br][bc] = rb.x; Bs[0][br][bc + 1] = rb.y;
    __syncthreads();
    const int kt = (K + BK - 1) / BK;
    for (int t = 0; t < kt; ++t) {
        const int cur = t & 1;
        if (t + 1 < kt) load((t + 1) * BK, ra, rb);                     // in flight while we compute
        #pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a = *reinterpret_cast<const float4*>(&As[cur][k][ty * TM]);
            const float4 bv = *reinterpret_cast<const float4*>(&Bs[cur][k][tx * TN]);
            const float av[4] = {a.x, a.y, a.z, a.w}, bw[4] = {bv.x, bv.y, bv.z, bv.w};
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += av[i] * bw[j];
        }
        if (t + 1 < kt) {
            const int nxt = cur ^ 1;
            As[nxt][ac][ar] = ra.x; As[nxt][ac + 1][ar] = ra.y; Bs[nxt][br][bc] = rb.x; Bs[nxt][br][bc + 1] = rb.y;
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = m0 + ty * TM + i;
        if (r >= M) continue;
        const int c = n0 + tx * TN;
        if (c + 3 < N && (N % 4) == 0) {
            *reinterpret_cast<float4*>(&C[(size_t)r * N + c]) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
        } else {
            for (int j = 0; j < TN; ++j) if (c + j < N) C[(size_t)r * N + c + j] = acc[i][j];
        }
    }
}

extern "C" void solve(const float* A, const float* B, float* C, int batch, int M, int N, int K) {
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM, batch);
    bmm_rb<<<grid, 256>>>(A, B, C, M, N, K);
}
