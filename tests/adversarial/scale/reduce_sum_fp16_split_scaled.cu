// task: reduce_sum
// expect: ok
// trick: none: the fp16 split of reduce_sum_fp16_split.cu with the range handled. Each warp takes 256
//        consecutive floats (8 per lane), finds their max |value| with shuffles and scales them by the
//        power of two that brings it into [2^10, 2^11) before the split (hi = fp16(x s), lo = fp16(x s - hi),
//        lo parts summed as half2 in runs of four, whose sums stay far below 65504), then multiplies each
//        octet's fp32 sum by 2^-e (exact). fp16's subnormals and its overflow are out of reach at any
//        scale: emulated error at most 0.03 of the allowance at scales 1, 1e4 and 1e-4 on every test
//        shape, 4e-5 of it at a benchmark-size sample (n = 2^28, scale 1).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define THREADS 256
#define MAX_BLOCKS 4096

__device__ float g_partials[MAX_BLOCKS];

__device__ __forceinline__ void load8(const float* __restrict__ x, long long base, long long n, float v[8]) {
    if (base + 8 <= n) {                               // x is 16-byte aligned and base a multiple of 8
        float4 a = *reinterpret_cast<const float4*>(x + base);
        float4 b = *reinterpret_cast<const float4*>(x + base + 4);
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
        v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = base + i < n ? x[base + i] : 0.0f;
    }
}

// hi parts summed in fp32, lo parts as half2 (x0, x1) + (x2, x3) + (x4, x5) + (x6, x7) in fp16
__device__ __forceinline__ float octet_sum(const float v[8]) {
    __half h[8], l[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        h[i] = __float2half_rn(v[i]);
        l[i] = __float2half_rn(v[i] - __half2float(h[i]));      // exact difference, rounded to fp16
    }
    float hs = __half2float(h[0]);
#pragma unroll
    for (int i = 1; i < 8; ++i) hs += __half2float(h[i]);
    __half2 lo = __halves2half2(l[0], l[1]);
    lo = __hadd2(lo, __halves2half2(l[2], l[3]));
    lo = __hadd2(lo, __halves2half2(l[4], l[5]));
    lo = __hadd2(lo, __halves2half2(l[6], l[7]));
    return hs + (__low2float(lo) + __high2float(lo));
}

// the exponent e with max * 2^e in [2^10, 2^11) (0 for an all-zero tile), clamped so 2^e and 2^-e are normal
__device__ __forceinline__ int scale_exp(unsigned bits) {
    if (bits == 0u) return 0;
    int e = 10 + 127 - (int)(bits >> 23);
    return max(-126, min(126, e));
}

__device__ __forceinline__ float pow2(int e) { return __int_as_float((127 + e) << 23); }

__device__ __forceinline__ float block_sum(float v) {
    __shared__ float part[THREADS / 32];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.0f;
    if (threadIdx.x == 0)
        for (int w = 0; w < THREADS / 32; ++w) t += part[w];
    return t;                                          // valid in thread 0
}

__global__ void __launch_bounds__(THREADS) reduce_fp16(const float* __restrict__ x, long long n) {
    const long long tiles = (n + 255) / 256;          // one tile of 256 floats per warp and step
    const long long warps = (long long)gridDim.x * (THREADS / 32);
    const int lane = threadIdx.x & 31;
    float acc = 0.0f;
    for (long long t = ((long long)blockIdx.x * THREADS + threadIdx.x) >> 5; t < tiles; t += warps) {
        float v[8];
        load8(x, t * 256 + lane * 8, n, v);
        float m = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(v[i]));
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        const int e = scale_exp(__float_as_uint(m));
        const float s = pow2(e);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] *= s;         // a power of two: exact
        acc += octet_sum(v) * pow2(-e);
    }
    float t = block_sum(acc);
    if (threadIdx.x == 0) g_partials[blockIdx.x] = t;
}

__global__ void __launch_bounds__(THREADS) finish(int count, float* __restrict__ out) {
    float acc = 0.0f;
    for (int i = threadIdx.x; i < count; i += THREADS) acc += g_partials[i];
    float t = block_sum(acc);
    if (threadIdx.x == 0) out[0] = t;
}

extern "C" void solve(const float* x, float* out, int n) {
    static int sms = 0;
    if (sms == 0) {
        int dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (sms <= 0) sms = 132;
    }
    if (n <= 0) {
        cudaMemsetAsync(out, 0, sizeof(float), 0);
        return;
    }
    long long tiles = ((long long)n + 255) / 256;
    long long blocks = (tiles + THREADS / 32 - 1) / (THREADS / 32);
    long long cap = 8LL * sms < MAX_BLOCKS ? 8LL * sms : MAX_BLOCKS;
    if (blocks > cap) blocks = cap;
    reduce_fp16<<<(unsigned)blocks, THREADS>>>(x, (long long)n);
    finish<<<1, THREADS>>>((int)blocks, out);
}
