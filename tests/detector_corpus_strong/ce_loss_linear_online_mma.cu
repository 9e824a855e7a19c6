// features: tensor_cores_mma, online_softmax, kernel_fusion, warp_shuffle, fast_math_intrinsics, readonly_cache, loop_unrolling
// case: fused linear + cross-entropy: logits of 16 rows x 8 classes per mma.sync, an online log-sum-exp over the vocabulary.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cstdint>

constexpr int D = 64;      // hidden size (4 k-steps of 16)

__device__ __forceinline__ void mma16816(float* d, const uint32_t* a, const uint32_t* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// x: rows x D (half), W: vocab x D (half), target: rows; loss[r] = logsumexp(x W^T)[r] - (x W^T)[r][target[r]].
__global__ void ce_linear(const __half* __restrict__ x, const __half* __restrict__ W, const int* __restrict__ target,
                          float* __restrict__ loss, int rows, int vocab) {
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int m0 = warp * 16;
    if (m0 >= rows) return;
    const uint32_t* x32 = reinterpret_cast<const uint32_t*>(x);
    uint32_t a[D / 16][4];
    #pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {                 // the warp's 16 rows, held as A fragments
        const int c = ks * 8 + t;                         // in half2 units
        int r0 = min(m0 + g, rows - 1), r1 = min(m0 + g + 8, rows - 1);
        a[ks][0] = x32[(size_t)r0 * (D / 2) + c];
        a[ks][1] = x32[(size_t)r1 * (D / 2) + c];
        a[ks][2] = x32[(size_t)r0 * (D / 2) + c + 4];
        a[ks][3] = x32[(size_t)r1 * (D / 2) + c + 4];
    }
    const int tgt0 = target[min(m0 + g, rows - 1)], tgt1 = target[min(m0 + g + 8, rows - 1)];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, hit[2] = {0.f, 0.f};
    const uint32_t* w32 = reinterpret_cast<const uint32_t*>(W);
    for (int n0 = 0; n0 < vocab; n0 += 8) {
        float d[4] = {0.f, 0.f, 0.f, 0.f};
        const int n = min(n0 + g, vocab - 1);
        #pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
            uint32_t b[2] = {w32[(size_t)n * (D / 2) + ks * 8 + t], w32[(size_t)n * (D / 2) + ks * 8 + t + 4]};
            mma16816(d, a[ks], b);
        }
        for (int h = 0; h < 2; ++h) {                     // row g (+8): columns n0 + 2t, n0 + 2t + 1
            const int tg = h ? tgt1 : tgt0;
            for (int j = 0; j < 2; ++j) {
                const int col = n0 + 2 * t + j;
                if (col >= vocab) continue;
                const float s = d[2 * h + j];
                if (col == tg) hit[h] = s;
                const float mn = fmaxf(m[h], s);
                l[h] = l[h] * __expf(m[h] - mn) + __expf(s - mn);
                m[h] = mn;
            }
        }
    }
    for (int h = 0; h < 2; ++h) {                         // merge the quad's four partial (max, sum)
        for (int o = 1; o < 4; o <<= 1) {
            float mo = __shfl_xor_sync(0xffffffffu, m[h], o), lo = __shfl_xor_sync(0xffffffffu, l[h], o);
            float mn = fmaxf(m[h], mo);
            l[h] = l[h] * __expf(m[h] - mn) + lo * __expf(mo - mn);
            m[h] = mn;
            hit[h] += __shfl_xor_sync(0xffffffffu, hit[h], o);
        }
        const int r = m0 + g + 8 * h;
        if (t == 0 && r < rows) loss[r] = m[h] + __logf(l[h]) - hit[h];
    }
}

extern "C" void solve(const __half* x, const __half* W, const int* target, float* loss, int rows, int vocab) {
    const int warps = (rows + 15) / 16;
    ce_linear<<<(warps + 3) / 4, 128>>>(x, W, target, loss, rows, vocab);
}
