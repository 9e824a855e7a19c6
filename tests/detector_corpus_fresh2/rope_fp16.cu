// features: vector_loads, reduced_precision, coalesced_access, cache_hints, readonly_cache, loop_unrolling
// case: in-place rotate-half RoPE on fp16 q and k in one launch: a thread owns 8 rotation pairs of one position, keeps its fp32 cos/sin in registers across a group of 8 heads of q and of k, and rotates in fp32 with 16-byte streaming loads/stores, 4 heads in flight.
// Rotary position embedding (rotate-half / NeoX layout) applied in place to fp16 q and k,
// both [batch, heads, seq, 128]. cos/sin: fp32 [seq, 64] tables.
//   x1 = x[i], x2 = x[i + 64]:  x[i] = x1 cos - x2 sin,  x[i + 64] = x2 cos + x1 sin
// One thread owns 8 rotation pairs of one position, keeps its cos/sin in registers and loops over
// a group of 8 heads of q and of k (one launch for both), so each table entry is reused 16 times.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cstdint>

namespace {

constexpr int HD = 128;
constexpr int HALF = HD / 2;
constexpr int CHUNKS = HALF / 8;       // 8 threads per position
constexpr int THREADS = 256;           // 32 positions per block
constexpr int HUNROLL = 4;             // heads in flight per thread

__device__ __forceinline__ void rotate8(uint4& a, uint4& b, const float (&c)[8], const float (&s)[8]) {
    __half2* ha = reinterpret_cast<__half2*>(&a);
    __half2* hb = reinterpret_cast<__half2*>(&b);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 x1 = __half22float2(ha[i]);
        const float2 x2 = __half22float2(hb[i]);
        const float c0 = c[2 * i], c1 = c[2 * i + 1], s0 = s[2 * i], s1 = s[2 * i + 1];
        ha[i] = __floats2half2_rn(fmaf(x1.x, c0, -x2.x * s0), fmaf(x1.y, c1, -x2.y * s1));
        hb[i] = __floats2half2_rn(fmaf(x2.x, c0, x1.x * s0), fmaf(x2.y, c1, x1.y * s1));
    }
}

__device__ __forceinline__ void rope_heads(__half* __restrict__ t, size_t head_stride, int heads,
                                           const float (&c)[8], const float (&s)[8]) {
    int h = 0;
    for (; h + HUNROLL <= heads; h += HUNROLL) {
        uint4 a[HUNROLL], b[HUNROLL];
#pragma unroll
        for (int u = 0; u < HUNROLL; ++u) {
            uint4* p = reinterpret_cast<uint4*>(t + (size_t)(h + u) * head_stride);
            a[u] = __ldcs(p);
            b[u] = __ldcs(p + HALF / 8);
        }
#pragma unroll
        for (int u = 0; u < HUNROLL; ++u) {
            rotate8(a[u], b[u], c, s);
            uint4* p = reinterpret_cast<uint4*>(t + (size_t)(h + u) * head_stride);
            __stcs(p, a[u]);
            __stcs(p + HALF / 8, b[u]);
        }
    }
    for (; h < heads; ++h) {
        uint4* p = reinterpret_cast<uint4*>(t + (size_t)h * head_stride);
        uint4 a = __ldcs(p), b = __ldcs(p + HALF / 8);
        rotate8(a, b, c, s);
        __stcs(p, a);
        __stcs(p + HALF / 8, b);
    }
}

constexpr int HGROUP = 8;              // heads per block along grid.z (keeps several waves of blocks)

// grid: (ceil(seq * CHUNKS / THREADS), batch, ceil(max(heads) / HGROUP))
__global__ void __launch_bounds__(THREADS)
rope_qk_kernel(__half* q, __half* k, const float* __restrict__ cos_t, const float* __restrict__ sin_t,
               int heads_q, int heads_k, int seq) {
    const int gid = blockIdx.x * THREADS + threadIdx.x;
    const int pos = gid / CHUNKS;
    const int chunk = gid % CHUNKS;  // consecutive threads: 8 chunks of a position, then the next position
    if (pos >= seq) return;
    const int b = blockIdx.y;

    float c[8], s[8];
    {
        const float4* cp = reinterpret_cast<const float4*>(cos_t + (size_t)pos * HALF + chunk * 8);
        const float4* sp = reinterpret_cast<const float4*>(sin_t + (size_t)pos * HALF + chunk * 8);
        const float4 c0 = __ldg(cp), c1 = __ldg(cp + 1), s0 = __ldg(sp), s1 = __ldg(sp + 1);
        c[0] = c0.x; c[1] = c0.y; c[2] = c0.z; c[3] = c0.w; c[4] = c1.x; c[5] = c1.y; c[6] = c1.z; c[7] = c1.w;
        s[0] = s0.x; s[1] = s0.y; s[2] = s0.z; s[3] = s0.w; s[4] = s1.x; s[5] = s1.y; s[6] = s1.z; s[7] = s1.w;
    }
    const size_t head_stride = (size_t)seq * HD;
    const size_t off = (size_t)pos * HD + chunk * 8;
    const int h0 = blockIdx.z * HGROUP;
    if (h0 < heads_q)
        rope_heads(q + ((size_t)b * heads_q + h0) * head_stride + off, head_stride, min(HGROUP, heads_q - h0), c, s);
    if (h0 < heads_k)
        rope_heads(k + ((size_t)b * heads_k + h0) * head_stride + off, head_stride, min(HGROUP, heads_k - h0), c, s);
}

}  // namespace

extern "C" cudaError_t rope_fp16(__half* q, __half* k, const float* cos_t, const float* sin_t,
                                 int batch, int heads_q, int heads_k, int seq, int head_dim, cudaStream_t stream) {
    if (head_dim != HD) return cudaErrorInvalidValue;
    if (batch <= 0 || seq <= 0) return cudaSuccess;
    const int hmax = heads_q > heads_k ? heads_q : heads_k;
    dim3 grid((unsigned)(((size_t)seq * CHUNKS + THREADS - 1) / THREADS), (unsigned)batch,
              (unsigned)((hmax + HGROUP - 1) / HGROUP));
    rope_qk_kernel<<<grid, THREADS, 0, stream>>>(q, k, cos_t, sin_t, heads_q, heads_k, seq);
    return cudaGetLastError();
}
