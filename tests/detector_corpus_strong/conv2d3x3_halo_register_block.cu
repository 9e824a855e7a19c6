// features: smem_tiling, register_blocking, coalesced_access, loop_unrolling, readonly_cache, occupancy_tuning
// case: 3x3 convolution, one channel plane per grid z: a 32 x 32 output tile with its halo in shared memory, each
// thread computing a column of 4 outputs from registers.
#include <cuda_runtime.h>

constexpr int TW = 32, TH = 32, RY = 4;     // block 32 x 8 threads, 4 rows each

__global__ void __launch_bounds__(256) conv3x3(const float* __restrict__ in, const float* __restrict__ w9,
                                               float* __restrict__ out, int H, int W) {
    __shared__ float tile[TH + 2][TW + 2];
    const int plane = blockIdx.z, x0 = blockIdx.x * TW, y0 = blockIdx.y * TH;
    const float* src = in + (size_t)plane * H * W;
    for (int i = threadIdx.y * TW + threadIdx.x; i < (TH + 2) * (TW + 2); i += 256) {
        const int ty = i / (TW + 2), tx = i % (TW + 2), gy = y0 + ty - 1, gx = x0 + tx - 1;
        tile[ty][tx] = (gy >= 0 && gy < H && gx >= 0 && gx < W) ? src[(size_t)gy * W + gx] : 0.f;
    }
    __syncthreads();
    float w[9];
    #pragma unroll
    for (int k = 0; k < 9; ++k) w[k] = w9[plane * 9 + k];
    float acc[RY] = {0.f, 0.f, 0.f, 0.f};
    const int tx = threadIdx.x, ty = threadIdx.y * RY;
    #pragma unroll
    for (int r = 0; r < RY + 2; ++r) {          // each loaded row feeds up to three outputs
        const float a = tile[ty + r][tx], b = tile[ty + r][tx + 1], c = tile[ty + r][tx + 2];
        #pragma unroll
        for (int o = 0; o < RY; ++o) {
            const int ky = r - o;
            if (ky >= 0 && ky < 3) acc[o] += a * w[ky * 3] + b * w[ky * 3 + 1] + c * w[ky * 3 + 2];
        }
    }
    float* dst = out + (size_t)plane * H * W;
    #pragma unroll
    for (int o = 0; o < RY; ++o) {
        const int gy = y0 + ty + o, gx = x0 + tx;
        if (gy < H && gx < W) dst[(size_t)gy * W + gx] = acc[o];
    }
}

extern "C" void solve(const float* in, const float* w, float* out, int planes, int H, int W) {
    dim3 grid((W + TW - 1) / TW, (H + TH - 1) / TH, planes);
    conv3x3<<<grid, dim3(32, 8)>>>(in, w, out, H, W);
}
