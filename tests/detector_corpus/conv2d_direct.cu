// features: coalesced_access, loop_unrolling, readonly_cache
// case: direct 3x3 convolution, one output per thread along x, weights from global memory.
__global__ void conv3x3(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                        int C, int H, int W, int Kout) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y, k = blockIdx.z;
    if (j >= W) return;
    float s = 0.f;
    for (int c = 0; c < C; ++c)
#pragma unroll
        for (int di = 0; di < 3; ++di)
#pragma unroll
            for (int dj = 0; dj < 3; ++dj) {
                int ii = i + di - 1, jj = j + dj - 1;
                if (ii >= 0 && ii < H && jj >= 0 && jj < W) s += w[((k * C + c) * 3 + di) * 3 + dj] * x[(c * H + ii) * W + jj];
            }
    y[(k * H + i) * W + j] = s;
}
