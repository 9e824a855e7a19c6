// task: reduce_sum
// expect: wrong_answer
// trick: fp16 inside an fp32 sum, without scaling. Each thread takes 8 consecutive floats, splits each
//        into fp16 hi = fp16(x) and lo = fp16(x - hi), adds the hi parts in fp32 and the lo parts as
//        half2 pairs with __hadd2 (a run of four per lane), and accumulates the octet in fp32; blocks
//        write partials that one block adds in a fixed order. On the usual draw (|x| < 1) hi + lo keeps
//        22 bits of each input and the fp16 sums of the tiny lo parts lose almost nothing: emulated error
//        at most 0.04 of the allowance at every test shape, 4e-5 of it at a benchmark-size sample
//        (n = 2^28). Scaled by 1e-4 the inputs fall where fp16's spacing is 2^-24 (below 2^-13, subnormal
//        below 2^-14): hi rounds each input to a multiple of 6e-8, lo underflows to 0, and the sum is off
//        by 7 to 67 times the allowance at n <= 1048579 (about 1.3 times at n = 4194304); 1e-3 already
//        fails (3 times), 1e-2 passes (0.17). Scaled by 1e4 it passes (0.004): inputs stay below 65504,
//        Inf comes only from |x| >= 65520 (scale 1e5).
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
    const long long octets = (n + 7) / 8;
    const long long stride = (long long)gridDim.x * THREADS;
    float acc = 0.0f;
    for (long long o = (long long)blockIdx.x * THREADS + threadIdx.x; o < octets; o += stride) {
        float v[8];
        load8(x, o * 8, n, v);
        acc += octet_sum(v);
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
    long long octets = ((long long)n + 7) / 8;
    long long blocks = (octets + THREADS - 1) / THREADS;
    long long cap = 8LL * sms < MAX_BLOCKS ? 8LL * sms : MAX_BLOCKS;
    if (blocks > cap) blocks = cap;
    reduce_fp16<<<(unsigned)blocks, THREADS>>>(x, (long long)n);
    finish<<<1, THREADS>>>((int)blocks, out);
}
