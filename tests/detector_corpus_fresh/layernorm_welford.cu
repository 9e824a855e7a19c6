// features: single_pass_row, kernel_fusion, block_reduction_tree, warp_shuffle, vector_loads, coalesced_access, readonly_cache, cache_hints, loop_unrolling, occupancy_tuning
// case: LayerNorm of a 16384 x 4096 fp32 matrix with gamma/beta: one 256-thread block per row holds the row in registers as float4s, per-thread exact Welford states are merged with Chan's formula by shuffles and a 32-slot shared array, and the normalized row is written from the held copy (one read, one write).
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

struct Welford {
    float n;     // element count (exact in fp32 for rows < 2^24)
    float mean;
    float m2;    // sum of squared deviations from mean
};

__device__ __forceinline__ Welford welford_merge(const Welford& a, const Welford& b) {
    Welford r;
    r.n = a.n + b.n;
    if (r.n == 0.f) { r.mean = 0.f; r.m2 = 0.f; return r; }
    const float delta = b.mean - a.mean;
    const float wb = b.n / r.n;
    r.mean = fmaf(delta, wb, a.mean);
    r.m2 = a.m2 + b.m2 + delta * delta * a.n * wb;
    return r;
}

__device__ __forceinline__ Welford warp_welford(Welford w) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        Welford other;
        other.n = __shfl_xor_sync(0xffffffffu, w.n, o);
        other.mean = __shfl_xor_sync(0xffffffffu, w.mean, o);
        other.m2 = __shfl_xor_sync(0xffffffffu, w.m2, o);
        w = welford_merge(w, other);
    }
    return w;
}

// Block-wide Welford merge: warps merge by xor-shuffles, warp results meet in a
// 32-slot shared array, warp 0 merges them and broadcasts (mean, rstd).
__device__ __forceinline__ void block_stats(Welford w, int cols, float eps,
                                            float& mean, float& rstd) {
    __shared__ Welford s_part[32];
    __shared__ float s_mean, s_rstd;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    w = warp_welford(w);
    if (lane == 0) s_part[warp] = w;
    __syncthreads();
    if (warp == 0) {
        Welford v = (lane < kWarps) ? s_part[lane] : Welford{0.f, 0.f, 0.f};
        v = warp_welford(v);
        if (lane == 0) {
            s_mean = v.mean;
            const float var = fmaxf(v.m2 / (float)cols, 0.f);   // biased variance (LayerNorm)
            s_rstd = rsqrtf(var + eps);
        }
    }
    __syncthreads();
    mean = s_mean;
    rstd = s_rstd;
}

// Row held in registers: VEC float4 per thread, cols <= kThreads * 4 * VEC, cols % 4 == 0.
template <int VEC>
__global__ void __launch_bounds__(kThreads, 4)
layernorm_rows_reg(const float* __restrict__ x, const float* __restrict__ gamma,
                   const float* __restrict__ beta, float* __restrict__ y,
                   int cols, float eps) {
    const int row = blockIdx.x;
    const int c4 = cols >> 2;
    const float4* __restrict__ xr = reinterpret_cast<const float4*>(x + (size_t)row * cols);
    float4* __restrict__ yr = reinterpret_cast<float4*>(y + (size_t)row * cols);

    float4 v[VEC];
    int cnt = 0;
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        const int idx = threadIdx.x + i * kThreads;       // consecutive threads, consecutive float4
        if (idx < c4) {
            v[i] = __ldcs(xr + idx);                       // read once: evict-first
            sum += (v[i].x + v[i].y) + (v[i].z + v[i].w);
            cnt += 4;
        } else {
            v[i] = make_float4(0.f, 0.f, 0.f, 0.f);
        }
    }
    // Exact per-thread Welford state from the held values.
    Welford w;
    w.n = (float)cnt;
    w.mean = cnt ? sum / (float)cnt : 0.f;
    float m2 = 0.f;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        const int idx = threadIdx.x + i * kThreads;
        if (idx < c4) {
            const float a = v[i].x - w.mean, b = v[i].y - w.mean;
            const float c = v[i].z - w.mean, d = v[i].w - w.mean;
            m2 = fmaf(a, a, m2); m2 = fmaf(b, b, m2);
            m2 = fmaf(c, c, m2); m2 = fmaf(d, d, m2);
        }
    }
    w.m2 = m2;

    float mean, rstd;
    block_stats(w, cols, eps, mean, rstd);

    const float4* __restrict__ g4 = reinterpret_cast<const float4*>(gamma);
    const float4* __restrict__ b4 = reinterpret_cast<const float4*>(beta);
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        const int idx = threadIdx.x + i * kThreads;
        if (idx < c4) {
            const float4 g = __ldg(g4 + idx);              // reused by every row: keep cached
            const float4 b = __ldg(b4 + idx);
            float4 o;
            o.x = fmaf((v[i].x - mean) * rstd, g.x, b.x);
            o.y = fmaf((v[i].y - mean) * rstd, g.y, b.y);
            o.z = fmaf((v[i].z - mean) * rstd, g.z, b.z);
            o.w = fmaf((v[i].w - mean) * rstd, g.w, b.w);
            __stcs(yr + idx, o);                           // written once: streaming store
        }
    }
}

// Fallback for long or unaligned rows: streaming Welford per thread, then a second read.
__global__ void __launch_bounds__(kThreads)
layernorm_rows_generic(const float* __restrict__ x, const float* __restrict__ gamma,
                       const float* __restrict__ beta, float* __restrict__ y,
                       int cols, float eps) {
    const int row = blockIdx.x;
    const float* __restrict__ xr = x + (size_t)row * cols;
    float* __restrict__ yr = y + (size_t)row * cols;
    Welford w{0.f, 0.f, 0.f};
    for (int c = threadIdx.x; c < cols; c += kThreads) {
        const float val = xr[c];
        w.n += 1.f;
        const float d = val - w.mean;
        w.mean += d / w.n;
        w.m2 = fmaf(d, val - w.mean, w.m2);
    }
    float mean, rstd;
    block_stats(w, cols, eps, mean, rstd);
    for (int c = threadIdx.x; c < cols; c += kThreads)
        yr[c] = fmaf((xr[c] - mean) * rstd, __ldg(gamma + c), __ldg(beta + c));
}

}  // namespace

extern "C" cudaError_t layernorm_welford(const float* x, const float* gamma, const float* beta,
                                         float* y, int rows, int cols, float eps,
                                         cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y) |
                           reinterpret_cast<uintptr_t>(gamma) | reinterpret_cast<uintptr_t>(beta)) & 15) == 0;
    const int per_vec = kThreads * 4;
    if (aligned && (cols & 3) == 0 && cols <= 8 * per_vec) {
        if (cols <= per_vec)
            layernorm_rows_reg<1><<<rows, kThreads, 0, stream>>>(x, gamma, beta, y, cols, eps);
        else if (cols <= 2 * per_vec)
            layernorm_rows_reg<2><<<rows, kThreads, 0, stream>>>(x, gamma, beta, y, cols, eps);
        else if (cols <= 4 * per_vec)
            layernorm_rows_reg<4><<<rows, kThreads, 0, stream>>>(x, gamma, beta, y, cols, eps);
        else
            layernorm_rows_reg<8><<<rows, kThreads, 0, stream>>>(x, gamma, beta, y, cols, eps);
    } else {
        layernorm_rows_generic<<<rows, kThreads, 0, stream>>>(x, gamma, beta, y, cols, eps);
    }
    return cudaGetLastError();
}
