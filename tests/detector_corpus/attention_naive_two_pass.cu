// features: register_blocking, loop_unrolling, kernel_fusion
// case: one thread per query, scores recomputed in a second pass for the weighted sum (no online rescale). Scores through exp into the next product in one kernel (the score matrix never written): kernel_fusion by the labelling decision on attention.
#define D 64
__global__ void attn_naive(const float* Q, const float* K, const float* V, float* O, int S) {
    int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= S) return;
    float out[D];
#pragma unroll
    for (int d = 0; d < D; ++d) out[d] = 0.f;
    float m = -INFINITY;
    for (int j = 0; j < S; ++j) {
        float s = 0.f;
        for (int d = 0; d < D; ++d) s += Q[q * D + d] * K[j * D + d];
        m = fmaxf(m, s * 0.125f);
    }
    float l = 0.f;
    for (int j = 0; j < S; ++j) {
        float s = 0.f;
        for (int d = 0; d < D; ++d) s += Q[q * D + d] * K[j * D + d];
        float p = expf(s * 0.125f - m);
        l += p;
        for (int d = 0; d < D; ++d) out[d] += p * V[j * D + d];
    }
    for (int d = 0; d < D; ++d) O[q * D + d] = out[d] / l;
}
