// features: tensor_cores_3xtf32, tensor_cores_mma, readonly_cache
// case: y = x W^T + b in fp32 accuracy: mma.sync m16n8k8 tf32 with cvt.rna big parts and their residuals, fragments from global.
#include <cuda_runtime.h>
#include <cstdint>

__device__ __forceinline__ uint32_t to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ void mma1688(float* d, const uint32_t* a, const uint32_t* b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// x: rows x in, W: out x in (both row-major), one warp per 16 x 8 output tile; in % 8 == 0.
__global__ void linear_3xtf32(const float* __restrict__ x, const float* __restrict__ W, const float* __restrict__ bias,
                              float* __restrict__ y, int rows, int in, int out) {
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x & 31;
    const int tiles_n = (out + 7) / 8;
    const int m0 = (warp / tiles_n) * 16, n0 = (warp % tiles_n) * 8;
    if (m0 >= rows) return;
    const int g = lane >> 2, t = lane & 3;
    auto X = [&](int r, int c) { return r < rows ? x[(size_t)r * in + c] : 0.f; };
    auto Wt = [&](int n, int c) { return n < out ? W[(size_t)n * in + c] : 0.f; };
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k = 0; k < in; k += 8) {
        float av[4] = {X(m0 + g, k + t), X(m0 + g + 8, k + t), X(m0 + g, k + t + 4), X(m0 + g + 8, k + t + 4)};
        float bv[2] = {Wt(n0 + g, k + t), Wt(n0 + g, k + t + 4)};
        uint32_t ab[4], as[4], bb[2], bs[2];
        for (int i = 0; i < 4; ++i) { ab[i] = to_tf32(av[i]); as[i] = to_tf32(av[i] - __uint_as_float(ab[i])); }
        for (int i = 0; i < 2; ++i) { bb[i] = to_tf32(bv[i]); bs[i] = to_tf32(bv[i] - __uint_as_float(bb[i])); }
        mma1688(d, as, bb);
        mma1688(d, ab, bs);
        mma1688(d, ab, bb);
    }
    for (int h = 0; h < 2; ++h) {
        const int r = m0 + g + 8 * h, c = n0 + 2 * t;
        if (r < rows && c < out) y[(size_t)r * out + c] = d[2 * h] + bias[c];
        if (r < rows && c + 1 < out) y[(size_t)r * out + c + 1] = d[2 * h + 1] + bias[c + 1];
    }
}

extern "C" void solve(const float* x, const float* W, const float* bias, float* y, int rows, int in, int out) {
    const int warps = ((rows + 15) / 16) * ((out + 7) / 8);
    linear_3xtf32<<<(warps + 3) / 4, 128>>>(x, W, bias, y, rows, in, out);
}
