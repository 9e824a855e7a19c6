// features: distance_as_gemm, tensor_cores_split_fp16, tensor_cores_mma, reduced_precision, kernel_fusion, cp_async, double_buffering, smem_tiling, bank_conflict_padding, block_rasterization, vector_loads, coalesced_access, readonly_cache, cache_hints, warp_per_row, warp_shuffle, loop_unrolling, occupancy_tuning, stream_ordered_alloc
// case: Full 16384x16384 Euclidean distance matrix of fp32 points (d=256) at fp32 accuracy: a prepass splits X into fp16 hi/lo (lo scaled by 2^11) and takes fp32 norms, then a 128x128-tile 3xFP16 mma.sync GEMM (ldmatrix, 3-stage cp.async ring, grouped tile order) applies sqrt(|x|^2+|y|^2-2x.y) in its epilogue.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

constexpr int DIM = 256;
constexpr int BM = 128, BN = 128, BK = 32;
constexpr int THREADS = 256;               // 8 warps: 2 (M) x 4 (N), warp tile 64 x 32
constexpr int LDH = BK + 8;                // halves per shared row: 80 B stride, ldmatrix conflict-free
constexpr int NSTAGE = 3;
constexpr int TILE_H = BM * LDH;           // halves per operand tile
constexpr int STAGE_H = 4 * TILE_H;        // A hi, A lo, B hi, B lo
constexpr size_t SMEM_BYTES = sizeof(__half) * (size_t)NSTAGE * STAGE_H;
constexpr int GROUP = 8;
constexpr float LO_SCALE = 2048.f, LO_UNSCALE = 1.f / 2048.f;

// one warp per point: fp16 hi/lo split and the fp32 squared norm
__global__ void __launch_bounds__(256)
split_and_norm(const float* __restrict__ X, __half* __restrict__ Xh, __half* __restrict__ Xl,
               float* __restrict__ nrm, int n)
{
    const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (row >= n) return;
    const float4* src = reinterpret_cast<const float4*>(X + (size_t)row * DIM) + lane * 2;
    float v[8];
    float4 a = __ldg(src), b = __ldg(src + 1);
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    __align__(16) __half hi[8], lo[8];
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        s = fmaf(v[i], v[i], s);
        hi[i] = __float2half_rn(v[i]);
        lo[i] = __float2half_rn((v[i] - __half2float(hi[i])) * LO_SCALE);
    }
    reinterpret_cast<uint4*>(Xh + (size_t)row * DIM)[lane] = *reinterpret_cast<uint4*>(hi);
    reinterpret_cast<uint4*>(Xl + (size_t)row * DIM)[lane] = *reinterpret_cast<uint4*>(lo);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) nrm[row] = s;
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const __half* p) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void load_stage(__half* st, const __half* __restrict__ Xh, const __half* __restrict__ Xl,
                                           int m0, int n0, int k0, int tid) {
#pragma unroll
    for (int i = 0; i < (4 * BM * BK / 8) / THREADS; ++i) {
        int c = tid + i * THREADS;             // 0 .. 2047
        int which = c >> 9;                    // 512 chunks per operand tile
        int r = (c >> 2) & (BM - 1), col = (c & 3) * 8;
        const __half* src = (which & 1) ? Xl : Xh;
        int grow = (which < 2 ? m0 : n0) + r;
        cp_async16(st + which * TILE_H + r * LDH + col, src + (size_t)grow * DIM + k0 + col);
    }
}

__global__ void __launch_bounds__(THREADS, 1)
pairwise_dist_kernel(const __half* __restrict__ Xh, const __half* __restrict__ Xl,
                     const float* __restrict__ nrm, float* __restrict__ out, int n)
{
    extern __shared__ __align__(16) __half sm[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int wm = warp & 1, wn = warp >> 1;
    const int g = lane >> 2, t = lane & 3;

    // grouped (rasterized) tile order for L2 reuse
    const int tiles_m = n / BM, tiles_n = n / BN;
    const int id = blockIdx.x;
    const int per_group = GROUP * tiles_n;
    const int first_m = (id / per_group) * GROUP;
    const int band = min(tiles_m - first_m, GROUP);
    const int tm = first_m + (id % per_group) % band;
    const int tn = (id % per_group) / band;
    const int m0 = tm * BM, n0 = tn * BN;

    float acc[4][4][4], accx[4][4][4];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b)
#pragma unroll
            for (int c = 0; c < 4; ++c) { acc[a][b][c] = 0.f; accx[a][b][c] = 0.f; }

    constexpr int KT = DIM / BK;
#pragma unroll
    for (int s = 0; s < NSTAGE - 1; ++s) {
        load_stage(sm + s * STAGE_H, Xh, Xl, m0, n0, s * BK, tid);
        cp_async_commit();
    }

    for (int kt = 0; kt < KT; ++kt) {
        cp_async_wait<NSTAGE - 2>();
        __syncthreads();                        // stage kt landed; stage kt-1 free
        if (kt + NSTAGE - 1 < KT)
            load_stage(sm + ((kt + NSTAGE - 1) % NSTAGE) * STAGE_H, Xh, Xl, m0, n0, (kt + NSTAGE - 1) * BK, tid);
        cp_async_commit();

        const __half* st = sm + (kt % NSTAGE) * STAGE_H;
        const __half* sAh = st;
        const __half* sAl = st + TILE_H;
        const __half* sBh = st + 2 * TILE_H;
        const __half* sBl = st + 3 * TILE_H;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            uint32_t bh[4][2], bl[4][2];
#pragma unroll
            for (int p = 0; p < 2; ++p) {
                int r = wn * 32 + p * 16 + (lane & 7) + ((lane >> 4) << 3);
                int c = kk + ((lane >> 3) & 1) * 8;
                uint32_t x[4];
                ldsm_x4(x, sBh + r * LDH + c);
                bh[2 * p][0] = x[0]; bh[2 * p][1] = x[1]; bh[2 * p + 1][0] = x[2]; bh[2 * p + 1][1] = x[3];
                ldsm_x4(x, sBl + r * LDH + c);
                bl[2 * p][0] = x[0]; bl[2 * p][1] = x[1]; bl[2 * p + 1][0] = x[2]; bl[2 * p + 1][1] = x[3];
            }
#pragma unroll
            for (int mt = 0; mt < 4; ++mt) {
                int r = wm * 64 + mt * 16 + (lane & 15);
                int c = kk + (lane >> 4) * 8;
                uint32_t ah[4], al[4];
                ldsm_x4(ah, sAh + r * LDH + c);
                ldsm_x4(al, sAl + r * LDH + c);
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) {
                    mma_f16(accx[mt][nt], ah, bl[nt][0], bl[nt][1]);   // cross terms, scaled by 2^11
                    mma_f16(accx[mt][nt], al, bh[nt][0], bh[nt][1]);
                    mma_f16(acc[mt][nt], ah, bh[nt][0], bh[nt][1]);
                }
            }
        }
    }
    cp_async_wait<0>();

    // epilogue: sqrt(|x|^2 + |y|^2 - 2 x.y)
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int i = m0 + wm * 64 + mt * 16 + g + h * 8;
            const float ni = __ldg(nrm + i);
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                const int j = n0 + wn * 32 + nt * 8 + 2 * t;
                const float2 nj = __ldg(reinterpret_cast<const float2*>(nrm + j));
                float dot0 = fmaf(accx[mt][nt][2 * h], LO_UNSCALE, acc[mt][nt][2 * h]);
                float dot1 = fmaf(accx[mt][nt][2 * h + 1], LO_UNSCALE, acc[mt][nt][2 * h + 1]);
                float d0 = sqrtf(fmaxf(fmaf(-2.f, dot0, ni + nj.x), 0.f));
                float d1 = sqrtf(fmaxf(fmaf(-2.f, dot1, ni + nj.y), 0.f));
                if (i == j) d0 = 0.f;
                if (i == j + 1) d1 = 0.f;
                __stcs(reinterpret_cast<float2*>(out + (size_t)i * n + j), make_float2(d0, d1));
            }
        }
    }
}

// X: [n][256] fp32, n % 128 == 0; out: [n][n] fp32 distances.
extern "C" void pairwise_dist_fp16split(const float* X, float* out, int n, cudaStream_t stream)
{
    __half* Xh = nullptr;
    float* nrm = nullptr;
    cudaMallocAsync(&Xh, sizeof(__half) * 2 * (size_t)n * DIM, stream);
    cudaMallocAsync(&nrm, sizeof(float) * (size_t)n, stream);
    __half* Xl = Xh + (size_t)n * DIM;
    split_and_norm<<<(n * 32 + 255) / 256, 256, 0, stream>>>(X, Xh, Xl, nrm, n);
    cudaFuncSetAttribute(pairwise_dist_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM_BYTES);
    const int tiles = (n / BM) * (n / BN);
    pairwise_dist_kernel<<<tiles, THREADS, SMEM_BYTES, stream>>>(Xh, Xl, nrm, out, n);
    cudaFreeAsync(Xh, stream);
    cudaFreeAsync(nrm, stream);
}
