// conv2d (no padding, stride 1) + per-channel bias + ReLU, one thread per output element.
#include <cuda_runtime.h>

__global__ void conv_bias_relu(const float* __restrict__ x, const float* __restrict__ bias,
                               const float* __restrict__ w, float* __restrict__ out, int N, int C, int H, int W,
                               int K, int R, int OH, int OW) {
    long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long total = (long long)N * K * OH * OW;
    if (idx >= total) return;
    int ow = idx % OW;
    int oh = (idx / OW) % OH;
    int k = (idx / ((long long)OW * OH)) % K;
    int n = idx / ((long long)OW * OH * K);
    float acc = 0.0f;
    for (int c = 0; c < C; ++c) {
        const float* xc = x + (((size_t)n * C + c) * H + oh) * W + ow;
        const float* wc = w + ((size_t)k * C + c) * R * R;
        for (int r = 0; r < R; ++r)
            for (int s = 0; s < R; ++s) acc += xc[(size_t)r * W + s] * wc[r * R + s];
    }
    acc += bias[k];
    out[idx] = acc > 0.0f ? acc : 0.0f;
}

extern "C" void solve(const float* x, const float* bias, const float* conv_weight, float* out, int batch_size,
                      int in_channels, int height, int width, int out_channels, int kernel_size, int out_dim2,
                      int out_dim3) {
    long long total = (long long)batch_size * out_channels * out_dim2 * out_dim3;
    if (total <= 0) return;
    long long blocks = (total - 1) / 256 + 1;
    conv_bias_relu<<<(unsigned)blocks, 256>>>(x, bias, conv_weight, out, batch_size, in_channels, height, width,
                                              out_channels, kernel_size, out_dim2, out_dim3);
}
