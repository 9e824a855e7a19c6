// features: vector_loads, reduced_precision, fast_math_intrinsics, grid_stride_loop, coalesced_access, readonly_cache, loop_unrolling
// case: tanh-GELU on bf16: 8 values per 16-byte load, packed bf16x2 math converted to float, tanh.approx.
#include <cuda_runtime.h>
#include <cuda_bf16.h>

__device__ __forceinline__ float tanh_approx(float x) {
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__global__ void gelu_bf16(const uint4* __restrict__ x, uint4* __restrict__ y, size_t n8) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n8; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = x[i];
        __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
        #pragma unroll
        for (int k = 0; k < 4; ++k) {
            float2 f = __bfloat1622float2(h[k]);
            f.x = 0.5f * f.x * (1.f + tanh_approx(0.7978845608f * (f.x + 0.044715f * f.x * f.x * f.x)));
            f.y = 0.5f * f.y * (1.f + tanh_approx(0.7978845608f * (f.y + 0.044715f * f.y * f.y * f.y)));
            h[k] = __float22bfloat162_rn(f);
        }
        y[i] = v;
    }
}

extern "C" void solve(const __nv_bfloat16* x, __nv_bfloat16* y, size_t n) {   // n % 8 == 0
    gelu_bf16<<<132 * 8, 256>>>(reinterpret_cast<const uint4*>(x), reinterpret_cast<uint4*>(y), n / 8);
}
