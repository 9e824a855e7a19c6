// features: coalesced_access, grid_stride_loop, loop_unrolling, fast_math_intrinsics, readonly_cache, vector_loads
// case: GELU (tanh form via exp) with float4 loads, a grid-stride loop and fast intrinsics.
__global__ void gelu_fast(const float4* __restrict__ x, float4* __restrict__ y, int n4) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += blockDim.x * gridDim.x) {
        float4 v = x[i];
        float e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            float u = 0.7978845608f * (e[k] + 0.044715f * e[k] * e[k] * e[k]);
            e[k] = e[k] * __fdividef(1.0f, 1.0f + __expf(-2.0f * u));
        }
        y[i] = make_float4(e[0], e[1], e[2], e[3]);
    }
}
