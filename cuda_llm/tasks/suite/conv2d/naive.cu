// Naive baseline: one thread per output element (n, k, i, j); loops over input channels and the 3x3
// window, reading x and w straight from global memory.
#include <cuda_runtime.h>

__global__ void conv2d_kernel(const float* x, const float* w, float* y, int N, int C, int H, int W, int K) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t total = (size_t)N * K * H * W;
    if (idx >= total) return;
    int j = (int)(idx % W);
    int i = (int)((idx / W) % H);
    int k = (int)((idx / ((size_t)W * H)) % K);
    int n = (int)(idx / ((size_t)W * H * K));
    float acc = 0.0f;
    for (int c = 0; c < C; ++c) {
        const float* xc = x + ((size_t)n * C + c) * H * W;
        const float* wc = w + ((size_t)k * C + c) * 9;
        for (int di = 0; di < 3; ++di) {
            int ii = i + di - 1;
            if (ii < 0 || ii >= H) continue;
            for (int dj = 0; dj < 3; ++dj) {
                int jj = j + dj - 1;
                if (jj < 0 || jj >= W) continue;
                acc += wc[di * 3 + dj] * xc[(size_t)ii * W + jj];
            }
        }
    }
    y[idx] = acc;
}

extern "C" void solve(const float* x, const float* w, float* y, int N, int C, int H, int W, int K) {
    size_t total = (size_t)N * K * H * W;
    if (total == 0) return;
    int threads = 256;
    unsigned int blocks = (unsigned int)((total + threads - 1) / threads);
    conv2d_kernel<<<blocks, threads>>>(x, w, y, N, C, H, W, K);
}
