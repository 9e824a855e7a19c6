// features: readonly_cache, coalesced_access, loop_unrolling
// case: causal depthwise conv1d (kernel 4) over (batch, channels, length): a thread per output, taps through __ldg.
#include <cuda_runtime.h>

constexpr int KW = 4;

__global__ void dwconv1d(const float* x, const float* w, const float* bias, float* y, int C, int L) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y;      // row = b * C + c
    if (t >= L) return;
    const int c = row % C;
    const float* xr = x + (size_t)row * L;
    float acc = __ldg(bias + c);
    #pragma unroll
    for (int k = 0; k < KW; ++k) {
        const int s = t - (KW - 1) + k;
        if (s >= 0) acc += __ldg(w + c * KW + k) * __ldg(xr + s);
    }
    y[(size_t)row * L + t] = acc;
}

extern "C" void solve(const float* x, const float* w, const float* bias, float* y, int B, int C, int L) {
    dim3 grid((L + 255) / 256, B * C);
    dwconv1d<<<grid, 256>>>(x, w, bias, y, C, L);
}
