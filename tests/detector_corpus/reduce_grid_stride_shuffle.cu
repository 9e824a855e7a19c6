// features: grid_stride_loop, warp_shuffle, vector_loads, coalesced_access, readonly_cache
// case: sum with a float4 grid-stride loop, warp shuffles and one atomic per warp.
__global__ void reduce_sum_vec(const float* __restrict__ x, float* out, int n) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float s = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n / 4; i += gridDim.x * blockDim.x) {
        float4 v = x4[i];
        s += (v.x + v.y) + (v.z + v.w);
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, s);
}
