// features: distance_as_gemm, tensor_cores_mma, tensor_cores_3xtf32, kernel_fusion, cp_async, double_buffering, smem_tiling, bank_conflict_padding, vector_loads, coalesced_access, readonly_cache, warp_per_row, warp_shuffle, loop_unrolling, occupancy_tuning, stream_ordered_alloc
// case: Exact 16-NN of 65536 queries among 65536 points in d=128: each block keeps 128 queries in shared memory, streams 64-point tiles through a cp.async double buffer, forms |p|^2 - 2 q.p with 3xTF32 mma.sync, stages the tile transposed in padded shared memory and keeps per-query sorted top-16 lists in registers (two threads per query, merged at the end).
#include <cuda_runtime.h>
#include <stdint.h>
#include <float.h>

constexpr int D = 128;              // feature dimension (compile-time)
constexpr int K = 16;               // neighbours
constexpr int BM = 128;             // queries per block
constexpr int BN = 64;              // points per tile
constexpr int THREADS = 256;        // 8 warps: 4 (M) x 2 (N), warp tile 32 x 32
constexpr int LDS = D + 4;          // padded rows: fragment reads (row g, col t) are conflict-free
constexpr int LDT = BM + 4;         // transposed distance tile row (one point, all queries)
constexpr size_t SMEM_BYTES = sizeof(float) * ((size_t)BM * LDS + 2 * (size_t)BN * LDS + (size_t)BN * LDT + 2 * BN);

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

__device__ __forceinline__ uint32_t f2tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ void split_tf32(float x, uint32_t& big, uint32_t& small) {
    big = f2tf32(x);
    small = f2tf32(x - __uint_as_float(big));
}
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void topk_insert(float (&kd)[K], int (&ki)[K], float d, int i) {
    if (d < kd[K - 1]) {
        kd[K - 1] = d; ki[K - 1] = i;
#pragma unroll
        for (int j = K - 1; j > 0; --j) {
            if (kd[j] < kd[j - 1]) {
                float tf = kd[j]; kd[j] = kd[j - 1]; kd[j - 1] = tf;
                int ti = ki[j]; ki[j] = ki[j - 1]; ki[j - 1] = ti;
            }
        }
    }
}

// squared norms, one warp per row
__global__ void row_sqnorm(const float* __restrict__ X, float* __restrict__ out, int rows) {
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (warp >= rows) return;
    const float4 v = __ldg(reinterpret_cast<const float4*>(X + (size_t)warp * D) + lane);   // D == 128
    float s = v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) out[warp] = s;
}

__device__ __forceinline__ void load_tile(float* sP, float* sPn, const float* __restrict__ P,
                                          const float* __restrict__ pnorm, int p0, int tid) {
#pragma unroll
    for (int i = 0; i < (BN * D / 4) / THREADS; ++i) {
        int c = tid + i * THREADS;
        int r = c / (D / 4), col = (c % (D / 4)) * 4;
        cp_async16(sP + r * LDS + col, P + (size_t)(p0 + r) * D + col);
    }
    if (tid < BN / 4) cp_async16(sPn + tid * 4, pnorm + p0 + tid * 4);
}

// Q: [nq][D], P: [np][D]; nq % 128 == 0, np % 64 == 0. Outputs squared distances, ascending.
__global__ void __launch_bounds__(THREADS, 1)
knn_topk_kernel(const float* __restrict__ Q, const float* __restrict__ P,
                const float* __restrict__ qnorm, const float* __restrict__ pnorm,
                int np, float* __restrict__ out_d, int* __restrict__ out_i)
{
    extern __shared__ __align__(16) float smem[];
    float* sQ = smem;                          // [BM][LDS]
    float* sP = sQ + BM * LDS;                 // [2][BN][LDS]
    float* sD = sP + 2 * BN * LDS;             // [BN][LDT]  distances, transposed
    float* sPn = sD + BN * LDT;                // [2][BN]

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3;
    const int wm = warp & 3, wn = warp >> 2;
    const int q0 = blockIdx.x * BM;

    // prologue: queries + first point tile
#pragma unroll 4
    for (int i = 0; i < (BM * D / 4) / THREADS; ++i) {
        int c = tid + i * THREADS;
        int r = c / (D / 4), col = (c % (D / 4)) * 4;
        cp_async16(sQ + r * LDS + col, Q + (size_t)(q0 + r) * D + col);
    }
    load_tile(sP, sPn, P, pnorm, 0, tid);
    cp_async_commit();

    float kd[K]; int ki[K];
#pragma unroll
    for (int j = 0; j < K; ++j) { kd[j] = FLT_MAX; ki[j] = -1; }
    const int my_q = tid & (BM - 1), my_h = tid >> 7;      // scan role: two threads per query

    const int ntiles = np / BN;
    for (int tile = 0; tile < ntiles; ++tile) {
        const int buf = tile & 1;
        if (tile + 1 < ntiles) {
            load_tile(sP + (buf ^ 1) * BN * LDS, sPn + (buf ^ 1) * BN, P, pnorm, (tile + 1) * BN, tid);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();

        const float* tP = sP + buf * BN * LDS;
        float acc[2][4][4];
#pragma unroll
        for (int a = 0; a < 2; ++a)
#pragma unroll
            for (int b = 0; b < 4; ++b)
#pragma unroll
                for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.f;

#pragma unroll 2
        for (int k0 = 0; k0 < D; k0 += 8) {
            uint32_t ab[2][4], as[2][4], bb[4][2], bs[4][2];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
                const float* q = sQ + (wm * 32 + mt * 16 + g) * LDS + k0 + t;
                split_tf32(q[0], ab[mt][0], as[mt][0]);
                split_tf32(q[8 * LDS], ab[mt][1], as[mt][1]);
                split_tf32(q[4], ab[mt][2], as[mt][2]);
                split_tf32(q[8 * LDS + 4], ab[mt][3], as[mt][3]);
            }
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                const float* p = tP + (wn * 32 + nt * 8 + g) * LDS + k0 + t;
                split_tf32(p[0], bb[nt][0], bs[nt][0]);
                split_tf32(p[4], bb[nt][1], bs[nt][1]);
            }
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) {
                    mma_tf32(acc[mt][nt], as[mt], bb[nt]);
                    mma_tf32(acc[mt][nt], ab[mt], bs[nt]);
                    mma_tf32(acc[mt][nt], ab[mt], bb[nt]);
                }
        }

        // epilogue: partial distance |p|^2 - 2 q.p, stored transposed (conflict-free with LDT = 132)
        const float* pn = sPn + buf * BN;
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    int row = wm * 32 + mt * 16 + g + ((i >> 1) << 3);
                    int col = wn * 32 + nt * 8 + 2 * t + (i & 1);
                    sD[col * LDT + row] = fmaf(-2.f, acc[mt][nt][i], pn[col]);
                }
        __syncthreads();

        // selection: thread (query, half) scans 32 candidates of the tile
        const int base = tile * BN + my_h * (BN / 2);
#pragma unroll 8
        for (int j = 0; j < BN / 2; ++j) {
            float d = sD[(my_h * (BN / 2) + j) * LDT + my_q];
            topk_insert(kd, ki, d, base + j);
        }
        // next iteration's top barrier orders this scan before sD and the stage are rewritten
    }

    // merge the two halves of each query
    __syncthreads();
    float* mD = sP;                               // reuse: [BM][K] distances
    int* mI = reinterpret_cast<int*>(sP + BM * K);
    if (my_h == 1) {
#pragma unroll
        for (int j = 0; j < K; ++j) { mD[my_q * K + j] = kd[j]; mI[my_q * K + j] = ki[j]; }
    }
    __syncthreads();
    if (my_h == 0) {
        for (int j = 0; j < K; ++j) {
            float d = mD[my_q * K + j];
            if (!(d < kd[K - 1])) break;          // other list is sorted
            topk_insert(kd, ki, d, mI[my_q * K + j]);
        }
        const float qn = __ldg(qnorm + q0 + my_q);
        float* od = out_d + (size_t)(q0 + my_q) * K;
        int* oi = out_i + (size_t)(q0 + my_q) * K;
#pragma unroll
        for (int j = 0; j < K; j += 4) {
            *reinterpret_cast<float4*>(od + j) = make_float4(fmaxf(kd[j] + qn, 0.f), fmaxf(kd[j + 1] + qn, 0.f),
                                                             fmaxf(kd[j + 2] + qn, 0.f), fmaxf(kd[j + 3] + qn, 0.f));
            *reinterpret_cast<int4*>(oi + j) = make_int4(ki[j], ki[j + 1], ki[j + 2], ki[j + 3]);
        }
    }
}

// Q: [nq][128], P: [np][128] fp32; nq % 128 == 0, np % 64 == 0.
// out_dist: [nq][16] squared Euclidean distances ascending, out_idx: [nq][16].
extern "C" void knn_distances_topk(const float* Q, const float* P, int nq, int np,
                                   float* out_dist, int* out_idx, cudaStream_t stream)
{
    float* norms = nullptr;
    cudaMallocAsync(&norms, sizeof(float) * ((size_t)nq + np), stream);
    row_sqnorm<<<(nq * 32 + 255) / 256, 256, 0, stream>>>(Q, norms, nq);
    row_sqnorm<<<(np * 32 + 255) / 256, 256, 0, stream>>>(P, norms + nq, np);
    cudaFuncSetAttribute(knn_topk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM_BYTES);
    knn_topk_kernel<<<nq / BM, THREADS, SMEM_BYTES, stream>>>(Q, P, norms, norms + nq, np, out_dist, out_idx);
    cudaFreeAsync(norms, stream);
}
