// features: tensor_cores_mma, tensor_cores_3xtf32, cp_async, double_buffering, smem_tiling, bank_conflict_padding, programmatic_dependent_launch, coalesced_access, vector_loads, readonly_cache, stream_ordered_alloc, occupancy_tuning, loop_unrolling
// case: fp32 3x3 conv (pad 1, stride 1; N=32 C=128 H=W=56 K=128, NCHW/KCRS/NKPQ) as an implicit GEMM on tensor cores at fp32 accuracy: weights are repacked to [r][s][c][k] by a PDL-chained pre-kernel, then 128-pixel x 128-channel block tiles stream im2col A (zero-filling 4-byte cp.async) and B (16-byte cp.async) through a 3-stage padded shared ring, and each warp computes a 64x32 tile with 3xTF32 mma.sync m16n8k8 (small*big + big*small + big*big).
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int BM = 128;             // output pixels per block
constexpr int BN = 128;             // output channels per block
constexpr int BKC = 32;             // input channels per stage (one filter tap)
constexpr int kStages = 3;
constexpr int kThreads = 256;       // 8 warps: 2 (M) x 4 (N), warp tile 64 x 32
constexpr int kPad = 8;             // row stride 136 floats: fragment reads hit 32 distinct banks
constexpr int kLd = BM + kPad;      // == BN + kPad
constexpr int kStageFloats = 2 * BKC * kLd;
constexpr int kSmemBytes = kStages * kStageFloats * 4;   // 104,448 B: two blocks per SM

// ---------------------------------------------------------------- weight repack
// w[k][c][r][s] -> wt[(r*3 + s)][c][k]  (k contiguous: 16-byte cp.async rows for the B tiles)
__global__ void __launch_bounds__(256)
repack_weights(const float* __restrict__ w, float* __restrict__ wt, int K, int C) {
    cudaTriggerProgrammaticLaunchCompletion();   // let the conv grid start its prologue
    const int total = 9 * C * K;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;   // output index: consecutive threads, consecutive k
    if (i < total) {
        const int k = i % K;
        const int c = (i / K) % C;
        const int rs = i / (K * C);
        wt[i] = __ldg(w + ((size_t)k * C + c) * 9 + rs);
    }
}

// ---------------------------------------------------------------- PTX helpers
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async4_zfill(uint32_t dst, const void* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" :: "r"(dst), "l"(src), "r"(valid ? 4 : 0) : "memory");
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

__device__ __forceinline__ uint32_t to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}
// x = big + small, both representable in tf32.
__device__ __forceinline__ void split_tf32(float x, uint32_t& big, uint32_t& small) {
    big = to_tf32(x);
    small = to_tf32(x - __uint_as_float(big));
}
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ---------------------------------------------------------------- conv kernel
__global__ void __launch_bounds__(kThreads, 2)
conv3x3_3xtf32_kernel(const float* __restrict__ in, const float* __restrict__ wt, float* __restrict__ out,
                      int Nb, int C, int H, int W, int K) {
    extern __shared__ __align__(16) float smem[];
    const int tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, tq = lane & 3;
    const int warp_m = warp & 1, warp_n = warp >> 1;

    const int HW = H * W;
    const int Mtot = Nb * HW;
    const int m0 = blockIdx.x * BM;
    const int n0 = blockIdx.y * BN;

    // A-load role: one pixel, 16 of the stage's 32 channels.
    const int a_m = tid & (BM - 1);
    const int a_c0 = (tid >> 7) * 16;
    const int gm = m0 + a_m;
    const bool m_ok = gm < Mtot;
    const int img = m_ok ? gm / HW : 0;
    const int pq = m_ok ? gm - img * HW : 0;
    const int p = pq / W, q = pq - (pq / W) * W;
    const float* in_img = in + (size_t)img * C * HW;

    const int cblocks = C / BKC;
    const int ktiles = 9 * cblocks;

    auto load_stage = [&](int kt, int stage) {
        const int rs = kt / cblocks;
        const int cb = kt - rs * cblocks;
        const int r = rs / 3, s = rs - (rs / 3) * 3;
        float* As = smem + stage * kStageFloats;
        float* Bs = As + BKC * kLd;
        // A: im2col rows, zero-filled outside the image (padding) and past the last pixel.
        const int ih = p + r - 1, iw = q + s - 1;
        const bool ok = m_ok && ih >= 0 && ih < H && iw >= 0 && iw < W;
        const float* src = in_img + (size_t)(cb * BKC + a_c0) * HW + (ok ? ih * W + iw : 0);
        const uint32_t dstA = smem_u32(As + a_c0 * kLd + a_m);
#pragma unroll
        for (int i = 0; i < 16; ++i)
            cp_async4_zfill(dstA + i * kLd * 4, ok ? src + (size_t)i * HW : in, ok);
        // B: 32 rows (channels) x 128 k, 16-byte chunks.
        const float* wsrc = wt + ((size_t)rs * C + cb * BKC) * K + n0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int chunk = tid + i * kThreads;       // 0..1023
            const int row = chunk >> 5, col4 = chunk & 31;
            cp_async16(smem_u32(Bs + row * kLd + col4 * 4), wsrc + (size_t)row * K + col4 * 4);
        }
    };

    // Everything above is independent of the weight repack; wait for it here (PDL).
    cudaGridDependencySynchronize();

#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) {
        if (st < ktiles) load_stage(st, st);
        cp_async_commit();
    }

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<kStages - 2>();     // stage kt landed (this thread's copies)
        __syncthreads();                  // ... and everyone's; stage kt-1 is free again
        {
            const int nk = kt + kStages - 1;
            if (nk < ktiles) load_stage(nk, nk % kStages);
            cp_async_commit();
        }
        const float* As = smem + (kt % kStages) * kStageFloats;
        const float* Bs = As + BKC * kLd;
#pragma unroll
        for (int ks = 0; ks < BKC / 8; ++ks) {
            const float* Ak = As + (ks * 8) * kLd + warp_m * 64;
            const float* Bk = Bs + (ks * 8) * kLd + warp_n * 32;
            uint32_t bb[4][2], bsm[4][2];
#pragma unroll
            for (int ni = 0; ni < 4; ++ni) {
                split_tf32(Bk[tq * kLd + ni * 8 + g], bb[ni][0], bsm[ni][0]);
                split_tf32(Bk[(tq + 4) * kLd + ni * 8 + g], bb[ni][1], bsm[ni][1]);
            }
#pragma unroll
            for (int mi = 0; mi < 4; ++mi) {
                uint32_t ab[4], asm_[4];
                split_tf32(Ak[tq * kLd + mi * 16 + g], ab[0], asm_[0]);
                split_tf32(Ak[tq * kLd + mi * 16 + g + 8], ab[1], asm_[1]);
                split_tf32(Ak[(tq + 4) * kLd + mi * 16 + g], ab[2], asm_[2]);
                split_tf32(Ak[(tq + 4) * kLd + mi * 16 + g + 8], ab[3], asm_[3]);
#pragma unroll
                for (int ni = 0; ni < 4; ++ni) {
                    mma_tf32(acc[mi][ni], asm_, bb[ni]);   // small terms first
                    mma_tf32(acc[mi][ni], ab, bsm[ni]);
                    mma_tf32(acc[mi][ni], ab, bb[ni]);
                }
            }
        }
    }
    cp_async_wait<0>();

    // Epilogue: out[n][k][p][q]; lanes g cover 8 consecutive pixels of one image (HW % 8 == 0 here)
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = m0 + warp_m * 64 + mi * 16 + g + 8 * h;
            if (m >= Mtot) continue;
            const int im = m / HW;
            const int pix = m - im * HW;
            float* obase = out + (size_t)im * K * HW + pix;
#pragma unroll
            for (int ni = 0; ni < 4; ++ni) {
                const int k = n0 + warp_n * 32 + ni * 8 + 2 * tq;
                obase[(size_t)k * HW] = acc[mi][ni][2 * h + 0];
                obase[(size_t)(k + 1) * HW] = acc[mi][ni][2 * h + 1];
            }
        }
    }
}

float* g_wt = nullptr;           // repacked weights, kept across calls
size_t g_wt_floats = 0;

}  // namespace

// out (N,K,H,W) = conv2d(in (N,C,H,W), w (K,C,3,3)), stride 1, padding 1, fp32.
// Requires C % 32 == 0 and K % 128 == 0. Not safe for concurrent calls (shared scratch).
extern "C" cudaError_t conv2d_implicit_gemm_3xtf32(const float* in, const float* w, float* out, int N, int C,
                                                   int H, int W, int K, cudaStream_t stream) {
    if (N <= 0 || H <= 0 || W <= 0 || K <= 0) return cudaSuccess;
    if (C % BKC != 0 || K % BN != 0) return cudaErrorInvalidValue;
    const size_t wt_floats = (size_t)9 * C * K;
    if (wt_floats > g_wt_floats) {
        if (g_wt) cudaFree(g_wt);
        cudaError_t e = cudaMalloc(&g_wt, wt_floats * sizeof(float));
        if (e != cudaSuccess) { g_wt = nullptr; g_wt_floats = 0; return e; }
        g_wt_floats = wt_floats;
    }
    static bool attr_set = false;
    if (!attr_set) {
        cudaError_t e = cudaFuncSetAttribute(conv3x3_3xtf32_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        if (e != cudaSuccess) return e;
        attr_set = true;
    }
    const int rp_blocks = (int)((wt_floats + 255) / 256);
    repack_weights<<<rp_blocks, 256, 0, stream>>>(w, g_wt, K, C);

    const long long Mtot = (long long)N * H * W;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)((Mtot + BM - 1) / BM), K / BN);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = kSmemBytes;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, conv3x3_3xtf32_kernel, in, (const float*)g_wt, out, N, C, H, W, K);
}
