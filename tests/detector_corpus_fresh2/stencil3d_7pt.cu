// features: smem_tiling, coalesced_access, vector_loads, readonly_cache, cache_hints, occupancy_tuning
// case: One 7-point Jacobi step on a 512^3 grid: 32x16-thread blocks own a 128x16 xy tile (a float4 per thread) and march over a 64-plane z range, keeping z-1/z/z+1 in registers (prefetched one plane ahead, halos too) and the current plane with its halo in shared memory.
#include <cuda_runtime.h>
#include <stdint.h>

constexpr int TX = 32, TY = 16;            // threads
constexpr int BX = TX * 4;                 // 128 x-points per tile (float4 per thread)
constexpr int BY = TY;                     // 16 y-points per tile
constexpr int ZCHUNK = 64;
constexpr int SW = BX + 8;                 // shared row: 4 floats of left pad so the interior is 16-byte aligned

// out = c0 * u + c1 * (sum of the 6 neighbours) in the interior; boundary points are copied.
__global__ void __launch_bounds__(TX * TY, 2)
stencil7_kernel(const float* __restrict__ in, float* __restrict__ out,
                int nx, int ny, int nz, float c0, float c1)
{
    __shared__ __align__(16) float s[BY + 2][SW];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x0 = blockIdx.x * BX + tx * 4;     // first of this thread's 4 x-points
    const int y = blockIdx.y * BY + ty;
    const int zb = blockIdx.z * ZCHUNK;
    const int ze = min(nz, zb + ZCHUNK);
    const size_t plane = (size_t)nx * ny;

    // halo roles (prefetched alongside the plane)
    const bool hy_lo = (ty == 0), hy_hi = (ty == TY - 1);
    const bool hx_lo = (tx == 0), hx_hi = (tx == TX - 1);
    const int yh = hy_lo ? max(y - 1, 0) : min(y + 1, ny - 1);
    const int xl = max(blockIdx.x * BX - 1, 0), xr = min(blockIdx.x * BX + BX, nx - 1);

    auto ld4 = [&](int z) -> float4 {
        return __ldg(reinterpret_cast<const float4*>(in + (size_t)z * plane + (size_t)y * nx + x0));
    };
    auto ldhy = [&](int z) -> float4 {
        return __ldg(reinterpret_cast<const float4*>(in + (size_t)z * plane + (size_t)yh * nx + x0));
    };
    auto ldhx = [&](int z) -> float {
        return __ldg(in + (size_t)z * plane + (size_t)y * nx + (hx_lo ? xl : xr));
    };

    float4 below = ld4(max(zb - 1, 0));
    float4 cur = ld4(zb);
    float4 above = ld4(min(zb + 1, nz - 1));
    float4 hy = make_float4(0.f, 0.f, 0.f, 0.f);
    float hx = 0.f;
    if (hy_lo || hy_hi) hy = ldhy(zb);
    if (hx_lo || hx_hi) hx = ldhx(zb);

    const bool yb = (y == 0 || y == ny - 1);
    for (int z = zb; z < ze; ++z) {
        // prefetch plane z+2 and the halos of plane z+1 before the barrier
        const int zn = min(z + 2, nz - 1);
        const int zh = min(z + 1, nz - 1);
        float4 next = ld4(zn);
        float4 hy_n = hy;
        float hx_n = hx;
        if (hy_lo || hy_hi) hy_n = ldhy(zh);
        if (hx_lo || hx_hi) hx_n = ldhx(zh);

        __syncthreads();                                   // previous plane fully read
        *reinterpret_cast<float4*>(&s[ty + 1][4 + tx * 4]) = cur;
        if (hy_lo) *reinterpret_cast<float4*>(&s[0][4 + tx * 4]) = hy;
        if (hy_hi) *reinterpret_cast<float4*>(&s[BY + 1][4 + tx * 4]) = hy;
        if (hx_lo) s[ty + 1][3] = hx;
        if (hx_hi) s[ty + 1][4 + BX] = hx;
        __syncthreads();

        const float4 n4 = *reinterpret_cast<const float4*>(&s[ty][4 + tx * 4]);
        const float4 s4 = *reinterpret_cast<const float4*>(&s[ty + 2][4 + tx * 4]);
        const float xm = s[ty + 1][3 + tx * 4];
        const float xp = s[ty + 1][8 + tx * 4];
        float4 r;
        r.x = fmaf(c0, cur.x, c1 * (xm    + cur.y + n4.x + s4.x + below.x + above.x));
        r.y = fmaf(c0, cur.y, c1 * (cur.x + cur.z + n4.y + s4.y + below.y + above.y));
        r.z = fmaf(c0, cur.z, c1 * (cur.y + cur.w + n4.z + s4.z + below.z + above.z));
        r.w = fmaf(c0, cur.w, c1 * (cur.z + xp    + n4.w + s4.w + below.w + above.w));
        if (yb || z == 0 || z == nz - 1) {
            r = cur;
        } else {
            if (x0 == 0) r.x = cur.x;
            if (x0 + 3 == nx - 1) r.w = cur.w;
        }
        __stcs(reinterpret_cast<float4*>(out + (size_t)z * plane + (size_t)y * nx + x0), r);

        below = cur; cur = above; above = next;
        hy = hy_n; hx = hx_n;
    }
}

// requires nx % 128 == 0, ny % 16 == 0 (512^3 qualifies); in and out must not alias.
extern "C" void stencil3d_7pt(const float* in, float* out, int nx, int ny, int nz,
                              float c0, float c1, cudaStream_t stream)
{
    dim3 block(TX, TY);
    dim3 grid(nx / BX, ny / BY, (nz + ZCHUNK - 1) / ZCHUNK);
    stencil7_kernel<<<grid, block, 0, stream>>>(in, out, nx, ny, nz, c0, c1);
}
