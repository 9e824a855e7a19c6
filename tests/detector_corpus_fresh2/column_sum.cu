// features: coalesced_access, vector_loads, readonly_cache, cache_hints, loop_unrolling, split_k, kernel_fusion, stream_ordered_alloc
// case: Column sums of a 65536x4096 matrix in one launch: each block sums a float4-wide column strip over a row slice, writes a partial, and the last block of each strip (threadfence + atomic ticket) adds the partials deterministically.
#include <cuda_runtime.h>
#include <stdint.h>

constexpr int THREADS = 128;            // one float4 column group per thread -> 512 columns per block
constexpr int ROWS_PER_SPLIT = 512;
constexpr int UNROLL = 8;

__global__ void __launch_bounds__(THREADS)
column_sum_kernel(const float* __restrict__ A, float* __restrict__ partial,
                  unsigned int* __restrict__ tickets, float* __restrict__ out,
                  int rows, int cols)
{
    const int ncol4 = cols >> 2;
    const int c4 = blockIdx.x * THREADS + threadIdx.x;
    const int split = blockIdx.y;
    const int nsplit = gridDim.y;
    const int r0 = split * ROWS_PER_SPLIT;
    const int r1 = min(rows, r0 + ROWS_PER_SPLIT);
    const float4* __restrict__ A4 = reinterpret_cast<const float4*>(A);

    float4 acc[2] = {make_float4(0.f, 0.f, 0.f, 0.f), make_float4(0.f, 0.f, 0.f, 0.f)};
    if (c4 < ncol4) {
        int r = r0;
        for (; r + UNROLL <= r1; r += UNROLL) {
            float4 v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) v[u] = __ldcs(A4 + (size_t)(r + u) * ncol4 + c4);
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                float4& a = acc[u & 1];
                a.x += v[u].x; a.y += v[u].y; a.z += v[u].z; a.w += v[u].w;
            }
        }
        for (; r < r1; ++r) {
            float4 v = __ldcs(A4 + (size_t)r * ncol4 + c4);
            acc[0].x += v.x; acc[0].y += v.y; acc[0].z += v.z; acc[0].w += v.w;
        }
        float4 s = make_float4(acc[0].x + acc[1].x, acc[0].y + acc[1].y,
                               acc[0].z + acc[1].z, acc[0].w + acc[1].w);
        __stcg(reinterpret_cast<float4*>(partial) + (size_t)split * ncol4 + c4, s);
    }

    // last block of this column strip finishes the sum
    __shared__ bool is_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned int t = atomicAdd(&tickets[blockIdx.x], 1u);
        is_last = (t == (unsigned)nsplit - 1);
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    if (c4 < ncol4) {
        float4 s0 = make_float4(0.f, 0.f, 0.f, 0.f), s1 = s0;
        int s = 0;
        for (; s + 2 <= nsplit; s += 2) {
            float4 a = __ldcg(reinterpret_cast<const float4*>(partial) + (size_t)s * ncol4 + c4);
            float4 b = __ldcg(reinterpret_cast<const float4*>(partial) + (size_t)(s + 1) * ncol4 + c4);
            s0.x += a.x; s0.y += a.y; s0.z += a.z; s0.w += a.w;
            s1.x += b.x; s1.y += b.y; s1.z += b.z; s1.w += b.w;
        }
        for (; s < nsplit; ++s) {
            float4 a = __ldcg(reinterpret_cast<const float4*>(partial) + (size_t)s * ncol4 + c4);
            s0.x += a.x; s0.y += a.y; s0.z += a.z; s0.w += a.w;
        }
        reinterpret_cast<float4*>(out)[c4] =
            make_float4(s0.x + s1.x, s0.y + s1.y, s0.z + s1.z, s0.w + s1.w);
    }
    if (threadIdx.x == 0) tickets[blockIdx.x] = 0;   // ready for the next call
}

// cols must be a multiple of 4; A and out 16-byte aligned.
extern "C" void column_sum(const float* A, float* out, int rows, int cols, cudaStream_t stream)
{
    const int nsplit = (rows + ROWS_PER_SPLIT - 1) / ROWS_PER_SPLIT;
    const int nstrips = (cols / 4 + THREADS - 1) / THREADS;
    float* partial = nullptr;
    unsigned int* tickets = nullptr;
    cudaMallocAsync(&partial, sizeof(float) * (size_t)nsplit * cols, stream);
    cudaMallocAsync(&tickets, sizeof(unsigned int) * nstrips, stream);
    cudaMemsetAsync(tickets, 0, sizeof(unsigned int) * nstrips, stream);
    column_sum_kernel<<<dim3(nstrips, nsplit), THREADS, 0, stream>>>(A, partial, tickets, out, rows, cols);
    cudaFreeAsync(partial, stream);
    cudaFreeAsync(tickets, stream);
}
