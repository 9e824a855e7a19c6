// features: warp_per_row, warp_shuffle, cache_hints, readonly_cache, coalesced_access, loop_unrolling, vector_loads, split_k, persistent_kernel, block_reduction_tree, launch_config_tuning, stream_ordered_alloc
// case: CSR SpMV (1M x 1M, 32M nnz, very uneven rows): a CSR-vector kernel gives each row a warp (coalesced streaming loads of values and columns, x gathered through the read-only path, shuffle reduction) and defers rows longer than 1024 nnz as 8192-nnz segments, which persistent blocks then reduce and add into y with one atomic per segment.
#include <cuda_runtime.h>
#include <stdint.h>
#include <algorithm>

namespace {

constexpr int THREADS     = 256;
constexpr int LONG_ROW    = 1024;    // rows longer than this go to the segment kernel
constexpr int SEG         = 8192;    // nnz per segment of a long row
constexpr unsigned FULL   = 0xffffffffu;

// One warp per row ("vector" CSR kernel).
__global__ void __launch_bounds__(THREADS)
spmv_vector_kernel(int M, const int* __restrict__ row_ptr, const int* __restrict__ col_idx,
                   const float* __restrict__ vals, const float* __restrict__ x, float* __restrict__ y,
                   int* __restrict__ seg_count, int4* __restrict__ segs)
{
    const int row  = (blockIdx.x * THREADS + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (row >= M) return;                                       // warp-uniform
    const int beg = __ldg(row_ptr + row), end = __ldg(row_ptr + row + 1);
    const int len = end - beg;

    if (len > LONG_ROW) {                                       // warp-uniform: defer as segments
        if (lane == 0) {
            const int nseg = (len + SEG - 1) / SEG;
            const int base = atomicAdd(seg_count, nseg);
            for (int s = 0; s < nseg; ++s)
                segs[base + s] = make_int4(row, beg + s * SEG, min(end, beg + (s + 1) * SEG), 0);
            y[row] = 0.f;                                       // segments accumulate into it
        }
        return;
    }

    // values and column indices are streamed once (evict-first); x stays hot in L2 / L1
    float s0 = 0.f, s1 = 0.f;
    int j = beg + lane;
    for (; j + 32 < end; j += 64) {
        const int   c0 = __ldcs(col_idx + j),   c1 = __ldcs(col_idx + j + 32);
        const float v0 = __ldcs(vals + j),      v1 = __ldcs(vals + j + 32);
        s0 = fmaf(v0, __ldg(x + c0), s0);
        s1 = fmaf(v1, __ldg(x + c1), s1);
    }
    if (j < end) s0 = fmaf(__ldcs(vals + j), __ldg(x + __ldcs(col_idx + j)), s0);
    float sum = s0 + s1;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(FULL, sum, o);
    if (lane == 0) y[row] = sum;
}

// Persistent blocks reduce the long-row segments; each segment's sum is added into y[row].
__global__ void __launch_bounds__(THREADS)
spmv_long_segments_kernel(const int* __restrict__ seg_count, const int4* __restrict__ segs,
                          const int* __restrict__ col_idx, const float* __restrict__ vals,
                          const float* __restrict__ x, float* __restrict__ y)
{
    __shared__ float s_warp[THREADS / 32];
    const int nseg = *seg_count;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (int s = blockIdx.x; s < nseg; s += gridDim.x) {
        const int4 sg = segs[s];
        float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
        int j = sg.y + tid;
        for (; j + 3 * THREADS < sg.z; j += 4 * THREADS) {
            a0 = fmaf(__ldcs(vals + j),               __ldg(x + __ldcs(col_idx + j)),               a0);
            a1 = fmaf(__ldcs(vals + j + THREADS),     __ldg(x + __ldcs(col_idx + j + THREADS)),     a1);
            a2 = fmaf(__ldcs(vals + j + 2 * THREADS), __ldg(x + __ldcs(col_idx + j + 2 * THREADS)), a2);
            a3 = fmaf(__ldcs(vals + j + 3 * THREADS), __ldg(x + __ldcs(col_idx + j + 3 * THREADS)), a3);
        }
        for (; j < sg.z; j += THREADS) a0 = fmaf(__ldcs(vals + j), __ldg(x + __ldcs(col_idx + j)), a0);
        float v = (a0 + a1) + (a2 + a3);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
        if (lane == 0) s_warp[warp] = v;
        __syncthreads();
        if (warp == 0) {
            v = lane < THREADS / 32 ? s_warp[lane] : 0.f;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
            if (lane == 0) atomicAdd(y + sg.x, v);
        }
        __syncthreads();
    }
}

} // namespace

// y = A x for CSR A (M rows, int32 row_ptr[M+1], col_idx[nnz], vals[nnz]).
extern "C" cudaError_t spmv_csr(int M, int nnz, const int* d_row_ptr, const int* d_col_idx,
                                const float* d_vals, const float* d_x, float* d_y, cudaStream_t stream)
{
    if (M <= 0) return cudaSuccess;
    // a row longer than LONG_ROW yields at most len/SEG + 1 < len/SEG + len/LONG_ROW segments
    const size_t max_segs = (size_t)nnz / SEG + (size_t)nnz / LONG_ROW + 1;
    void* scratch = nullptr;
    const size_t seg_bytes = sizeof(int4) * max_segs;
    cudaError_t err = cudaMallocAsync(&scratch, seg_bytes + 16, stream);
    if (err != cudaSuccess) return err;
    int4* segs = reinterpret_cast<int4*>(scratch);
    int* seg_count = reinterpret_cast<int*>(reinterpret_cast<char*>(scratch) + seg_bytes);
    cudaMemsetAsync(seg_count, 0, sizeof(int), stream);

    const long long threads = (long long)M * 32;
    const int grid1 = (int)((threads + THREADS - 1) / THREADS);
    spmv_vector_kernel<<<grid1, THREADS, 0, stream>>>(M, d_row_ptr, d_col_idx, d_vals, d_x, d_y, seg_count, segs);

    int dev = 0, sms = 0, per_sm = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, spmv_long_segments_kernel, THREADS, 0);
    const int grid2 = std::max(1, std::min<int>(sms * std::max(per_sm, 1), (int)max_segs));
    spmv_long_segments_kernel<<<grid2, THREADS, 0, stream>>>(seg_count, segs, d_col_idx, d_vals, d_x, d_y);
    err = cudaGetLastError();
    cudaFreeAsync(scratch, stream);
    return err;
}
