// features: online_softmax, vector_loads, cache_hints, warp_shuffle, block_reduction_tree, kernel_fusion, persistent_kernel, fast_math_intrinsics, loop_unrolling, coalesced_access, readonly_cache, launch_config_tuning, occupancy_tuning, stream_ordered_alloc
// case: mean cross-entropy of 8192 x 32768 fp32 logits against integer labels: persistent blocks take rows, each thread streams its part of a row once with float4 evict-first loads keeping an online (max, sum-of-exp2) pair, the pairs merge by shuffles and a 16-slot shared array, and the last block to finish (atomic ticket) sums the per-block losses into the mean.
#include <cuda_runtime.h>
#include <stdint.h>
#include <math.h>
#include <algorithm>

namespace {

constexpr int THREADS = 512;
constexpr int WARPS   = THREADS / 32;
constexpr int UNROLL  = 8;                       // float4 loads in flight per thread per step
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2   = 0.6931471805599453f;
constexpr unsigned FULL = 0xffffffffu;

__device__ unsigned int g_ce_ticket = 0;         // self-resetting "blocks done" counter

// merge (m2, s2) into (m, s); values live in the log2 domain: sum = s * 2^m
__device__ __forceinline__ void ms_merge(float& m, float& s, float m2, float s2)
{
    const float mn = fmaxf(m, m2);
    if (mn == -INFINITY) return;                 // both partials empty
    s = s * exp2f(m - mn) + s2 * exp2f(m2 - mn);
    m = mn;
}

__device__ __forceinline__ float max4(const float4 v)
{
    return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
}

template <bool VEC>
__global__ void __launch_bounds__(THREADS, 2)
cross_entropy_kernel(const float* __restrict__ logits, const int* __restrict__ labels,
                     int rows, int V, int ignore_index,
                     float2* __restrict__ block_part,    // [gridDim.x] (loss sum, valid rows)
                     float* __restrict__ loss_out)
{
    __shared__ float s_m[WARPS], s_s[WARPS];
    __shared__ bool  s_last;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    float block_loss = 0.f, block_cnt = 0.f;     // meaningful in thread 0

    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* rp = logits + (size_t)row * V;
        float m = -INFINITY, s = 0.f;            // online max / sum of 2^(x*log2e - m)

        if constexpr (VEC) {
            const float4* r4 = reinterpret_cast<const float4*>(rp);
            const int nv = V >> 2;
            for (int base = tid; base < nv; base += THREADS * UNROLL) {
                float4 v[UNROLL];
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    const int idx = base + u * THREADS;
                    v[u] = idx < nv ? __ldcs(r4 + idx)   // logits are read exactly once
                                    : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
                }
                float cm = -INFINITY;
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) cm = fmaxf(cm, max4(v[u]));
                cm *= LOG2E;
                const float mn = fmaxf(m, cm);
                if (mn == -INFINITY) continue;
                float acc = s * exp2f(m - mn);   // rescale the running sum once per step
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    acc += exp2f(fmaf(v[u].x, LOG2E, -mn));
                    acc += exp2f(fmaf(v[u].y, LOG2E, -mn));
                    acc += exp2f(fmaf(v[u].z, LOG2E, -mn));
                    acc += exp2f(fmaf(v[u].w, LOG2E, -mn));
                }
                m = mn; s = acc;
            }
        } else {
            for (int base = tid; base < V; base += THREADS * UNROLL) {
                float v[UNROLL];
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    const int idx = base + u * THREADS;
                    v[u] = idx < V ? __ldcs(rp + idx) : -INFINITY;
                }
                float cm = -INFINITY;
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) cm = fmaxf(cm, v[u]);
                cm *= LOG2E;
                const float mn = fmaxf(m, cm);
                if (mn == -INFINITY) continue;
                float acc = s * exp2f(m - mn);
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) acc += exp2f(fmaf(v[u], LOG2E, -mn));
                m = mn; s = acc;
            }
        }

        // warp merge of the (m, s) pairs
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float m2 = __shfl_xor_sync(FULL, m, o);
            const float s2 = __shfl_xor_sync(FULL, s, o);
            ms_merge(m, s, m2, s2);
        }
        if (lane == 0) { s_m[warp] = m; s_s[warp] = s; }
        __syncthreads();
        if (warp == 0) {
            m = lane < WARPS ? s_m[lane] : -INFINITY;
            s = lane < WARPS ? s_s[lane] : 0.f;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) {
                const float m2 = __shfl_xor_sync(FULL, m, o);
                const float s2 = __shfl_xor_sync(FULL, s, o);
                ms_merge(m, s, m2, s2);
            }
            if (lane == 0) {
                const int lab = __ldg(labels + row);
                if (lab != ignore_index && lab >= 0 && lab < V) {
                    const float xl  = __ldg(rp + lab);
                    const float lse = (m + __log2f(s)) * LN2;     // log-sum-exp of the row
                    block_loss += lse - xl;
                    block_cnt  += 1.f;
                }
            }
        }
        __syncthreads();                          // s_m / s_s are reused by the next row
    }

    // one partial per block, then the last block to arrive finishes the mean
    if (tid == 0) {
        block_part[blockIdx.x] = make_float2(block_loss, block_cnt);
        __threadfence();
        const unsigned done = atomicAdd(&g_ce_ticket, 1u);
        s_last = (done == gridDim.x - 1);
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();

    double sum = 0.0, cnt = 0.0;
    for (int i = tid; i < (int)gridDim.x; i += THREADS) {
        const float2 p = __ldcg(block_part + i);   // written by other blocks: read from L2
        sum += p.x; cnt += p.y;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        sum += __shfl_xor_sync(FULL, sum, o);
        cnt += __shfl_xor_sync(FULL, cnt, o);
    }
    __shared__ double s_sum[WARPS], s_cnt[WARPS];
    if (lane == 0) { s_sum[warp] = sum; s_cnt[warp] = cnt; }
    __syncthreads();
    if (warp == 0) {
        sum = lane < WARPS ? s_sum[lane] : 0.0;
        cnt = lane < WARPS ? s_cnt[lane] : 0.0;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            sum += __shfl_xor_sync(FULL, sum, o);
            cnt += __shfl_xor_sync(FULL, cnt, o);
        }
        if (lane == 0) {
            *loss_out = cnt > 0.0 ? (float)(sum / cnt) : 0.f;
            g_ce_ticket = 0;                      // ready for the next call
        }
    }
}

} // namespace

// loss = mean over rows with label != ignore_index of (logsumexp(logits[r]) - logits[r][label[r]]).
extern "C" cudaError_t cross_entropy_mean(const float* d_logits, const int* d_labels, int rows, int V,
                                          int ignore_index, float* d_loss, cudaStream_t stream)
{
    if (rows <= 0 || V <= 0) return cudaMemsetAsync(d_loss, 0, sizeof(float), stream);
    const bool vec = (V % 4 == 0) && ((reinterpret_cast<uintptr_t>(d_logits) & 15) == 0);

    int dev = 0, sms = 0, per_sm = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (vec) cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, cross_entropy_kernel<true>,  THREADS, 0);
    else     cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, cross_entropy_kernel<false>, THREADS, 0);
    const int grid = std::max(1, std::min(rows, sms * std::max(per_sm, 1)));

    float2* part = nullptr;
    cudaError_t err = cudaMallocAsync(&part, sizeof(float2) * grid, stream);
    if (err != cudaSuccess) return err;
    if (vec) cross_entropy_kernel<true ><<<grid, THREADS, 0, stream>>>(d_logits, d_labels, rows, V, ignore_index, part, d_loss);
    else     cross_entropy_kernel<false><<<grid, THREADS, 0, stream>>>(d_logits, d_labels, rows, V, ignore_index, part, d_loss);
    err = cudaGetLastError();
    cudaFreeAsync(part, stream);
    return err;
}
