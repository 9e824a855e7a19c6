// features: warp_shuffle, vector_loads, readonly_cache, cache_hints, loop_unrolling, smem_tiling, bank_conflict_padding
// case: Ascending sort of each 1024-float row (65536 rows) with a fully unrolled bitonic network: 128 threads per row hold 8 consecutive keys in registers, strides 1-4 compare inside a thread, strides 8-128 exchange by __shfl_xor_sync, and only the three 256/512 strides go through shared memory (split float4 halves, conflict-free).
#include <cuda_runtime.h>
#include <stdint.h>

constexpr int N = 1024;               // row length
constexpr int PER_THREAD = 8;
constexpr int ROW_THREADS = N / PER_THREAD;   // 128
constexpr int ROWS_PER_BLOCK = 2;
constexpr int THREADS = ROW_THREADS * ROWS_PER_BLOCK;

__global__ void __launch_bounds__(THREADS)
bitonic_sort_rows_kernel(const float* __restrict__ in, float* __restrict__ out, int rows)
{
    // per row: low and high float4 of every thread in separate arrays, so a warp's
    // 16-byte accesses cover 512 contiguous bytes (no 2-way conflict of a 32-byte stride)
    __shared__ float4 sLo[ROWS_PER_BLOCK][ROW_THREADS];
    __shared__ float4 sHi[ROWS_PER_BLOCK][ROW_THREADS];

    const int rloc = threadIdx.x / ROW_THREADS;
    const int tid = threadIdx.x % ROW_THREADS;
    const int row = blockIdx.x * ROWS_PER_BLOCK + rloc;
    const bool active = row < rows;
    const int rr = active ? row : rows - 1;              // inactive threads still join barriers

    const float4* src = reinterpret_cast<const float4*>(in + (size_t)rr * N) + tid * 2;
    float4 lo = __ldg(src), hi = __ldg(src + 1);
    float a[PER_THREAD] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};

#pragma unroll
    for (int k = 2; k <= N; k <<= 1) {
#pragma unroll
        for (int j = k >> 1; j > 0; j >>= 1) {
            if (j < PER_THREAD) {
                // inside the thread
#pragma unroll
                for (int r = 0; r < PER_THREAD; ++r) {
                    if ((r & j) == 0) {
                        const int p = r | j;
                        const bool asc = (((tid * PER_THREAD + r) & k) == 0);
                        const float x = a[r], y = a[p];
                        const bool sw = asc ? (x > y) : (x < y);
                        a[r] = sw ? y : x;
                        a[p] = sw ? x : y;
                    }
                }
            } else if (j < 32 * PER_THREAD) {
                // partner in the same warp
                const int m = j / PER_THREAD;
                const bool lower = (tid & m) == 0;
#pragma unroll
                for (int r = 0; r < PER_THREAD; ++r) {
                    const bool asc = (((tid * PER_THREAD + r) & k) == 0);
                    const float o = __shfl_xor_sync(0xffffffffu, a[r], m);
                    a[r] = (lower == asc) ? fminf(a[r], o) : fmaxf(a[r], o);
                }
            } else {
                // partner in another warp: exchange through shared memory
                const int m = j / PER_THREAD;
                const bool lower = (tid & m) == 0;
                sLo[rloc][tid] = make_float4(a[0], a[1], a[2], a[3]);
                sHi[rloc][tid] = make_float4(a[4], a[5], a[6], a[7]);
                __syncthreads();
                const float4 pl = sLo[rloc][tid ^ m], ph = sHi[rloc][tid ^ m];
                __syncthreads();
                const float o[PER_THREAD] = {pl.x, pl.y, pl.z, pl.w, ph.x, ph.y, ph.z, ph.w};
#pragma unroll
                for (int r = 0; r < PER_THREAD; ++r) {
                    const bool asc = (((tid * PER_THREAD + r) & k) == 0);
                    a[r] = (lower == asc) ? fminf(a[r], o[r]) : fmaxf(a[r], o[r]);
                }
            }
        }
    }
    if (active) {
        float4* dst = reinterpret_cast<float4*>(out + (size_t)row * N) + tid * 2;
        __stcs(dst, make_float4(a[0], a[1], a[2], a[3]));
        __stcs(dst + 1, make_float4(a[4], a[5], a[6], a[7]));
    }
}

// in, out: [rows][1024] fp32, distinct buffers
extern "C" void bitonic_sort_rows(const float* in, float* out, int rows, cudaStream_t stream)
{
    const int blocks = (rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
    bitonic_sort_rows_kernel<<<blocks, THREADS, 0, stream>>>(in, out, rows);
}
