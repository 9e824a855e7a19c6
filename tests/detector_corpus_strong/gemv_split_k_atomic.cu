// features: split_k, warp_shuffle, vector_loads, coalesced_access, readonly_cache
// case: y = A x for a few long rows (64 x 1M): the K dimension split over blocks, warp partials added with atomics.
#include <cuda_runtime.h>

constexpr int THREADS = 256, CHUNK = 8192;      // floats of K per block

__global__ void gemv_splitk(const float4* __restrict__ A, const float4* __restrict__ x, float* __restrict__ y, int K4) {
    const int row = blockIdx.y, k0 = blockIdx.x * (CHUNK / 4), k1 = min(k0 + CHUNK / 4, K4);
    const float4* a = A + (size_t)row * K4;
    float acc = 0.f;
    for (int k = k0 + threadIdx.x; k < k1; k += THREADS) {
        const float4 u = a[k], v = x[k];
        acc += u.x * v.x + u.y * v.y + u.z * v.z + u.w * v.w;
    }
    for (int o = 16; o; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(&y[row], acc);
}

extern "C" void solve(const float* A, const float* x, float* y, int M, int K) {    // K % 4 == 0
    cudaMemsetAsync(y, 0, sizeof(float) * M);
    dim3 grid((K + CHUNK - 1) / CHUNK, M);
    gemv_splitk<<<grid, THREADS>>>(reinterpret_cast<const float4*>(A), reinterpret_cast<const float4*>(x), y, K / 4);
}
