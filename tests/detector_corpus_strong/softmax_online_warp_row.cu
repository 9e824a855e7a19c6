// features: online_softmax, warp_per_row, warp_shuffle, vector_loads, coalesced_access, fast_math_intrinsics, kernel_fusion, readonly_cache, loop_unrolling, occupancy_tuning
// case: row softmax, one warp per row: one online pass for (max, sum), merged across lanes, then the output pass.
#include <cuda_runtime.h>

__global__ void __launch_bounds__(256) softmax_rows(const float4* __restrict__ x, float4* __restrict__ y, int rows, int cols4) {
    const int row = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float4* xr = x + (size_t)row * cols4;
    float m = -INFINITY, l = 0.f;
    for (int c = lane; c < cols4; c += 32) {
        float4 v = xr[c];
        float mx = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
        float mn = fmaxf(m, mx);
        l = l * __expf(m - mn) + __expf(v.x - mn) + __expf(v.y - mn) + __expf(v.z - mn) + __expf(v.w - mn);
        m = mn;
    }
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {                      // merge (max, sum) pairs across the warp
        float mo = __shfl_xor_sync(0xffffffffu, m, o), lo = __shfl_xor_sync(0xffffffffu, l, o);
        float mn = fmaxf(m, mo);
        l = (m == -INFINITY ? 0.f : l * __expf(m - mn)) + (mo == -INFINITY ? 0.f : lo * __expf(mo - mn));
        m = mn;
    }
    const float inv = 1.f / l;
    float4* yr = y + (size_t)row * cols4;
    for (int c = lane; c < cols4; c += 32) {
        float4 v = xr[c];
        yr[c] = make_float4(__expf(v.x - m) * inv, __expf(v.y - m) * inv, __expf(v.z - m) * inv, __expf(v.w - m) * inv);
    }
}

extern "C" void solve(const float* x, float* y, int rows, int cols) {    // cols a multiple of 4
    softmax_rows<<<(rows + 7) / 8, 256>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), rows, cols / 4);
}
