// Implicit-GEMM conv2d (3x3, pad 1, stride 1) on tensor cores with 3xTF32 (fp32-accurate).
// GEMM view: M = N*H*W output pixels, Ngemm = K out-channels, R = C*9 reduction (r = c*9 + tap).
// A (im2col of x) is gathered on the fly (coalesced along pixels), split into tf32 hi/lo once when
// staged to shared memory; B (weights) is pre-transposed/padded/split into hi/lo by a tiny prep kernel
// and streamed with cp.async.  Block tile 128x128x16, 8 warps (2 along M x 4 along N, 64x32 each),
// mma.sync m16n8k8 tf32, double-buffered smem with register prefetch of the next A tile.
#include <cuda_runtime.h>
#include <stdint.h>

#define BM 128
#define BN 128
#define BK 16
#define PAD 136
#define NTHREADS 256
#define STAGE_FLOATS (4 * BK * PAD)
#define SMEM_BYTES (2 * STAGE_FLOATS * 4)

__device__ __forceinline__ uint32_t f2tf32(float f) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
    return r;
}

__device__ __forceinline__ void mma_tf32(float* d, const uint32_t* a, const uint32_t* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// wt_hi/wt_lo: [Rp][Kp], wt[r][k] = w[k][r] split into tf32 hi + lo; zero padded.
__global__ void prep_weights(const float* __restrict__ w, uint32_t* __restrict__ wt_hi, uint32_t* __restrict__ wt_lo,
                             int K, int R, int Kp, int Rp) {
    size_t total = (size_t)Rp * Kp;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (size_t)gridDim.x * blockDim.x) {
        int r = (int)(idx / Kp);
        int k = (int)(idx - (size_t)r * Kp);
        float v = (r < R && k < K) ? w[(size_t)k * R + r] : 0.f;
        uint32_t hi = f2tf32(v);
        uint32_t lo = f2tf32(v - __uint_as_float(hi));
        wt_hi[idx] = hi;
        wt_lo[idx] = lo;
    }
}

__global__ void __launch_bounds__(NTHREADS, 2)
conv_tc_kernel(const float* __restrict__ x, const uint32_t* __restrict__ wt_hi, const uint32_t* __restrict__ wt_lo,
               float* __restrict__ y, int N, int C, int H, int W, int K, int Kp, int R) {
    extern __shared__ float4 smem4[];
    uint32_t* sm = reinterpret_cast<uint32_t*>(smem4);

    const int tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    const int wm = warp & 1, wn = warp >> 1;
    const int g = lane >> 2, t = lane & 3;

    const int HW = H * W;
    const long long M = (long long)N * HW;

    // A-gather assignment: one pixel per thread, 8 reduction rows (rsub + 2q).
    const int m_local = tid & (BM - 1);
    const int rsub = tid >> 7;
    const long long mg = (long long)blockIdx.x * BM + m_local;
    const bool mvalid = mg < M;
    int n = 0, i = 0, j = 0;
    if (mvalid) {
        n = (int)(mg / HW);
        int p = (int)(mg - (long long)n * HW);
        i = p / W;
        j = p - i * W;
    }
    const float* xb = x + (size_t)n * C * HW + (size_t)i * W + j;
    const int n0 = blockIdx.y * BN;
    const int numK = (R + BK - 1) / BK;

    float areg[8];
    float acc[4][4][4];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.f;

    auto loadA = [&](int kt) {
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            int r = kt * BK + rsub + 2 * q;
            int c = r / 9;
            int tap = r - 9 * c;
            int di = (tap * 11) >> 5;
            int dj = tap - 3 * di;
            int ii = i + di - 1, jj = j + dj - 1;
            bool ok = mvalid && (r < R) && ((unsigned)ii < (unsigned)H) && ((unsigned)jj < (unsigned)W);
            float v = 0.f;
            if (ok) v = __ldg(xb + (size_t)c * HW + (di - 1) * W + (dj - 1));
            areg[q] = v;
        }
    };
    auto storeA = [&](int stage) {
        uint32_t* Ahi = sm + stage * STAGE_FLOATS;
        uint32_t* Alo = Ahi + BK * PAD;
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            int k = rsub + 2 * q;
            uint32_t hi = f2tf32(areg[q]);
            uint32_t lo = f2tf32(areg[q] - __uint_as_float(hi));
            Ahi[k * PAD + m_local] = hi;
            Alo[k * PAD + m_local] = lo;
        }
    };
    auto loadB = [&](int kt, int stage) {
        uint32_t* Bhi = sm + stage * STAGE_FLOATS + 2 * BK * PAD;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            int idx = tid + NTHREADS * e;
            int arr = idx >> 9;
            int rem = idx & 511;
            int row = rem >> 5;
            int col4 = rem & 31;
            const uint32_t* src = (arr ? wt_lo : wt_hi) + (size_t)(kt * BK + row) * Kp + n0 + col4 * 4;
            uint32_t* dst = Bhi + arr * BK * PAD + row * PAD + col4 * 4;
            cp_async16(dst, src);
        }
    };
    auto compute = [&](int stage) {
        const uint32_t* Ahi = sm + stage * STAGE_FLOATS;
        const uint32_t* Alo = Ahi + BK * PAD;
        const uint32_t* Bhi = Alo + BK * PAD;
        const uint32_t* Blo = Bhi + BK * PAD;
#pragma unroll
        for (int ks = 0; ks < BK / 8; ++ks) {
            const int kb = ks * 8;
            uint32_t bh[4][2], bl[4][2];
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                int ncol = wn * 32 + nt * 8 + g;
                bh[nt][0] = Bhi[(kb + t) * PAD + ncol];
                bh[nt][1] = Bhi[(kb + t + 4) * PAD + ncol];
                bl[nt][0] = Blo[(kb + t) * PAD + ncol];
                bl[nt][1] = Blo[(kb + t + 4) * PAD + ncol];
            }
#pragma unroll
            for (int mt = 0; mt < 4; ++mt) {
                int mrow = wm * 64 + mt * 16 + g;
                uint32_t ah[4], al[4];
                ah[0] = Ahi[(kb + t) * PAD + mrow];
                ah[1] = Ahi[(kb + t) * PAD + mrow + 8];
                ah[2] = Ahi[(kb + t + 4) * PAD + mrow];
                ah[3] = Ahi[(kb + t + 4) * PAD + mrow + 8];
                al[0] = Alo[(kb + t) * PAD + mrow];
                al[1] = Alo[(kb + t) * PAD + mrow + 8];
                al[2] = Alo[(kb + t + 4) * PAD + mrow];
                al[3] = Alo[(kb + t + 4) * PAD + mrow + 8];
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) {
                    mma_tf32(acc[mt][nt], al, bh[nt]);
                    mma_tf32(acc[mt][nt], ah, bl[nt]);
                    mma_tf32(acc[mt][nt], ah, bh[nt]);
                }
            }
        }
    };

    loadA(0);
    loadB(0, 0);
    cp_async_commit();
    storeA(0);
    cp_async_wait_all();
    __syncthreads();

    for (int kt = 0; kt < numK; ++kt) {
        const int cur = kt & 1, nxt = cur ^ 1;
        const bool more = (kt + 1) < numK;
        if (more) {
            loadA(kt + 1);
            loadB(kt + 1, nxt);
            cp_async_commit();
        }
        compute(cur);
        if (more) {
            storeA(nxt);
            cp_async_wait_all();
        }
        __syncthreads();
    }

    // Epilogue: y[n][k][p]
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            long long m = (long long)blockIdx.x * BM + wm * 64 + mt * 16 + g + h * 8;
            if (m >= M) continue;
            int nn = (int)(m / HW);
            int p = (int)(m - (long long)nn * HW);
            float* yb = y + (size_t)nn * K * HW + p;
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                int k = n0 + wn * 32 + nt * 8 + 2 * t;
                if (k < K) yb[(size_t)k * HW] = acc[mt][nt][h * 2 + 0];
                if (k + 1 < K) yb[(size_t)(k + 1) * HW] = acc[mt][nt][h * 2 + 1];
            }
        }
    }
}

static uint32_t* g_wbuf = nullptr;
static size_t g_wcap = 0;
static bool g_attr_set = false;

extern "C" void solve(const float* x, const float* w, float* y, int N, int C, int H, int W, int K) {
    long long M = (long long)N * H * W;
    if (M <= 0 || K <= 0) return;
    int R = C * 9;
    int Kp = ((K + BN - 1) / BN) * BN;
    int Rp = ((R + BK - 1) / BK) * BK;
    if (Rp == 0) Rp = BK;
    size_t need = (size_t)2 * Rp * Kp;
    if (need > g_wcap) {
        if (g_wbuf) cudaFree(g_wbuf);
        cudaMalloc(&g_wbuf, need * sizeof(uint32_t));
        g_wcap = need;
    }
    uint32_t* wt_hi = g_wbuf;
    uint32_t* wt_lo = g_wbuf + (size_t)Rp * Kp;
    {
        size_t total = (size_t)Rp * Kp;
        int threads = 256;
        int blocks = (int)((total + threads - 1) / threads);
        if (blocks > 4096) blocks = 4096;
        prep_weights<<<blocks, threads>>>(w, wt_hi, wt_lo, K, R, Kp, Rp);
    }
    if (!g_attr_set) {
        cudaFuncSetAttribute(conv_tc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
        g_attr_set = true;
    }
    if (R == 0) {
        // C == 0: output is all zeros; kernel handles it (numK = 0 -> acc stays 0).
    }
    dim3 grid((unsigned)((M + BM - 1) / BM), (unsigned)(Kp / BN));
    conv_tc_kernel<<<grid, NTHREADS, SMEM_BYTES>>>(x, wt_hi, wt_lo, y, N, C, H, W, K, Kp, R);
}
