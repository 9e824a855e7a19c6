// features: distance_as_gemm, smem_tiling
// case: k-means assignment in GEMM form with centroids and their norms staged in shared memory.
#define KMAX 256
#define D 64
__global__ void assign_gemm_form(const float* pts, const float* cen, int* lab, int n, int k) {
    __shared__ float sc[KMAX * D / 8];
    __shared__ float cn[KMAX];
    for (int c = threadIdx.x; c < k; c += blockDim.x) {
        float s = 0.f;
        for (int t = 0; t < D; ++t) s += cen[c * D + t] * cen[c * D + t];
        cn[c] = s;
    }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float best = 3.4e38f;
    int arg = 0;
    for (int c0 = 0; c0 < k; c0 += KMAX / 8) {
        __syncthreads();
        for (int e = threadIdx.x; e < (KMAX / 8) * D; e += blockDim.x) sc[e] = cen[c0 * D + e];
        __syncthreads();
        for (int c = 0; c < KMAX / 8 && c0 + c < k; ++c) {
            float dot = 0.f;
            for (int t = 0; t < D; ++t) dot += pts[(size_t)i * D + t] * sc[c * D + t];
            float score = cn[c0 + c] - 2.f * dot;
            if (score < best) { best = score; arg = c0 + c; }
        }
    }
    if (i < n) lab[i] = arg;
}
