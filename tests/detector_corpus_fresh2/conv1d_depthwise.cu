// features: register_blocking, warp_shuffle, vector_loads, coalesced_access, cache_hints, readonly_cache, loop_unrolling
// case: depthwise conv1d (k=7, same padding) where each thread computes 8 outputs from two float4 loads with the 3-wide halos taken from neighbour lanes by shuffle, taps in registers, each input feeding up to 7 FMAs.
// Depthwise conv1d, kernel 7, "same" zero padding 3, stride 1: y[b,c,t] = bias[c] + sum_j w[c,j] x[b,c,t+j-3].
// x, y fp32 [batch, channels, length] (4 x 2048 x 65536), w [channels, 7], bias optional.
// Each thread computes 8 consecutive outputs from two float4 loads; the 3-element halos on each side come
// from the neighbouring lanes by shuffle (warp edges read 3 extra floats), so every input is read once
// from DRAM. The 7 taps of the block's channel sit in registers; each loaded value feeds up to 7 FMAs.
#include <cuda_runtime.h>
#include <cstdint>

namespace {

constexpr int KS = 7;
constexpr int PAD = 3;
constexpr int ITEMS = 8;                 // outputs per thread
constexpr int THREADS = 256;
constexpr int TILE = THREADS * ITEMS;    // 2048 outputs per block

// grid: (ceil(L / TILE), batch * channels); requires L % 8 == 0 (16-byte aligned rows)
__global__ void __launch_bounds__(THREADS)
dwconv1d_k7_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                   float* __restrict__ y, int C, int L) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.y;                    // b * C + c
    const int c = row % C;
    const int t0 = blockIdx.x * TILE + threadIdx.x * ITEMS;
    const float* xr = x + (size_t)row * L;
    float* yr = y + (size_t)row * L;

    float wk[KS];
#pragma unroll
    for (int j = 0; j < KS; ++j) wk[j] = __ldg(w + c * KS + j);
    const float b0 = bias ? __ldg(bias + c) : 0.f;

    // v[PAD .. PAD+7] = own 8 inputs, v[0..2] left halo, v[11..13] right halo
    float v[ITEMS + 2 * PAD];
    const bool in = t0 < L;                        // L % 8 == 0: a thread's 8 are all in or all out
    float4 a = make_float4(0.f, 0.f, 0.f, 0.f), bq = a;
    if (in) {
        const float4* p = reinterpret_cast<const float4*>(xr + t0);
        a = __ldcs(p);
        bq = __ldcs(p + 1);
    }
    v[3] = a.x; v[4] = a.y; v[5] = a.z; v[6] = a.w; v[7] = bq.x; v[8] = bq.y; v[9] = bq.z; v[10] = bq.w;

    // halos from the neighbours' registers
    v[0] = __shfl_up_sync(0xffffffffu, v[8], 1);
    v[1] = __shfl_up_sync(0xffffffffu, v[9], 1);
    v[2] = __shfl_up_sync(0xffffffffu, v[10], 1);
    v[11] = __shfl_down_sync(0xffffffffu, v[3], 1);
    v[12] = __shfl_down_sync(0xffffffffu, v[4], 1);
    v[13] = __shfl_down_sync(0xffffffffu, v[5], 1);
    if (lane == 0) {                               // warp's left edge: 3 floats (L2 hits, the previous warp read them)
#pragma unroll
        for (int j = 0; j < PAD; ++j) {
            const int t = t0 - PAD + j;
            v[j] = (t >= 0 && t < L) ? __ldg(xr + t) : 0.f;
        }
    }
    if (lane == 31) {
#pragma unroll
        for (int j = 0; j < PAD; ++j) {
            const int t = t0 + ITEMS + j;
            v[ITEMS + PAD + j] = (t < L) ? __ldg(xr + t) : 0.f;
        }
    }
    if (!in) return;
    if (t0 + ITEMS >= L) {                          // right edge of the row inside the warp
#pragma unroll
        for (int j = 0; j < PAD; ++j) v[ITEMS + PAD + j] = 0.f;
    }

    float o[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        float s = b0;
#pragma unroll
        for (int j = 0; j < KS; ++j) s = fmaf(wk[j], v[i + j], s);
        o[i] = s;
    }
    float4* q = reinterpret_cast<float4*>(yr + t0);
    __stcs(q, make_float4(o[0], o[1], o[2], o[3]));
    __stcs(q + 1, make_float4(o[4], o[5], o[6], o[7]));
}

}  // namespace

extern "C" cudaError_t conv1d_depthwise(const float* x, const float* w, const float* bias, float* y,
                                        int batch, int channels, int length, int ksize, cudaStream_t stream) {
    if (ksize != KS || length % ITEMS != 0) return cudaErrorInvalidValue;
    if (batch <= 0 || channels <= 0 || length <= 0) return cudaSuccess;
    const long long rows = (long long)batch * channels;
    if (rows > 65535) return cudaErrorInvalidValue;   // grid.y limit (4 x 2048 = 8192 here)
    dim3 grid((length + TILE - 1) / TILE, (unsigned)rows);
    dwconv1d_k7_kernel<<<grid, THREADS, 0, stream>>>(x, w, bias, y, channels, length);
    return cudaGetLastError();
}
