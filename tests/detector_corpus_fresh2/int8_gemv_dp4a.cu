// features: warp_per_row, warp_vote_match, vector_loads, coalesced_access, readonly_cache, cache_hints, loop_unrolling
// case: int8 GEMV y = W x (32768 x 32768, int32 out) on CUDA cores: one warp per row streams 16-byte chunks of W with L1-no-allocate loads (four in flight per lane), dots them against L1-resident x chunks with __dp4a, and reduces with __reduce_add_sync.
#include <cuda_runtime.h>
#include <stdint.h>

constexpr int WARPS_PER_BLOCK = 8;
constexpr int UNROLL = 4;

__device__ __forceinline__ int4 ld_stream_v4(const int4* p) {
    int4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.s32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
__device__ __forceinline__ int dot16(const int4 w, const int4 x, int acc) {
    acc = __dp4a(w.x, x.x, acc);
    acc = __dp4a(w.y, x.y, acc);
    acc = __dp4a(w.z, x.z, acc);
    acc = __dp4a(w.w, x.w, acc);
    return acc;
}

// W: [rows][cols] int8 row-major, x: [cols] int8, y: [rows] int32; cols % 16 == 0.
__global__ void __launch_bounds__(WARPS_PER_BLOCK * 32)
int8_gemv_dp4a_kernel(const int8_t* __restrict__ W, const int8_t* __restrict__ x,
                      int32_t* __restrict__ y, int rows, int cols)
{
    const int row = blockIdx.x * WARPS_PER_BLOCK + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const int nchunk = cols >> 4;                              // 16-byte chunks per row
    const int4* __restrict__ w4 = reinterpret_cast<const int4*>(W + (size_t)row * cols);
    const int4* __restrict__ x4 = reinterpret_cast<const int4*>(x);

    int acc0 = 0, acc1 = 0;
    int c = lane;
    for (; c + (UNROLL - 1) * 32 < nchunk; c += UNROLL * 32) {
        int4 w[UNROLL], xv[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) w[u] = ld_stream_v4(w4 + c + u * 32);   // W is touched once
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) xv[u] = __ldg(x4 + c + u * 32);          // x stays in L1
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            if (u & 1) acc1 = dot16(w[u], xv[u], acc1);
            else       acc0 = dot16(w[u], xv[u], acc0);
        }
    }
    for (; c < nchunk; c += 32) acc0 = dot16(ld_stream_v4(w4 + c), __ldg(x4 + c), acc0);

    const int sum = __reduce_add_sync(0xffffffffu, acc0 + acc1);
    if (lane == 0) y[row] = sum;
}

extern "C" void int8_gemv_dp4a(const int8_t* W, const int8_t* x, int32_t* y, int rows, int cols,
                               cudaStream_t stream)
{
    const int blocks = (rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
    int8_gemv_dp4a_kernel<<<blocks, WARPS_PER_BLOCK * 32, 0, stream>>>(W, x, y, rows, cols);
}
