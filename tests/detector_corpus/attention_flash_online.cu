// features: online_softmax, smem_tiling, register_blocking, fast_math_intrinsics, loop_unrolling, kernel_fusion
// case: flash-attention style: K/V tiles in shared memory, running max and sum with rescaled accumulators. Scores through exp into the next product in one kernel: kernel_fusion (labelling decision).
#define D 64
#define BK 64
__global__ void flash_attn(const float* Q, const float* K, const float* V, float* O, int S) {
    __shared__ float Ks[BK][D], Vs[BK][D];
    int q = blockIdx.x * blockDim.x + threadIdx.x;
    float qr[D], acc[D];
    float m = -INFINITY, l = 0.f;
#pragma unroll
    for (int d = 0; d < D; ++d) { qr[d] = q < S ? Q[q * D + d] * 0.125f : 0.f; acc[d] = 0.f; }
    for (int k0 = 0; k0 < S; k0 += BK) {
        for (int e = threadIdx.x; e < BK * D; e += blockDim.x) {
            int r = e / D, c = e % D;
            Ks[r][c] = k0 + r < S ? K[(k0 + r) * D + c] : 0.f;
            Vs[r][c] = k0 + r < S ? V[(k0 + r) * D + c] : 0.f;
        }
        __syncthreads();
        for (int j = 0; j < BK && k0 + j < S; ++j) {
            float s = 0.f;
#pragma unroll
            for (int d = 0; d < D; ++d) s += qr[d] * Ks[j][d];
            float m_new = fmaxf(m, s);
            float corr = __expf(m - m_new), p = __expf(s - m_new);
            l = l * corr + p;
#pragma unroll
            for (int d = 0; d < D; ++d) acc[d] = acc[d] * corr + p * Vs[j][d];
            m = m_new;
        }
        __syncthreads();
    }
    if (q < S)
        for (int d = 0; d < D; ++d) O[q * D + d] = acc[d] / l;
}
