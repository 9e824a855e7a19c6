// features: single_pass_row, warp_per_row, warp_shuffle, vector_loads, loop_unrolling, readonly_cache, kernel_fusion, coalesced_access
// case: RMS norm holding each row in registers (8 float4 per lane), one read per element.
template <int V>
__global__ void rmsnorm_reg(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, int rows, int cols) {
    int row = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float4* in = reinterpret_cast<const float4*>(x) + (size_t)row * (cols / 4);
    float4 vals[V];
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < V; ++k) {
        vals[k] = in[k * 32 + lane];
        acc += vals[k].x * vals[k].x + vals[k].y * vals[k].y + vals[k].z * vals[k].z + vals[k].w * vals[k].w;
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    acc = __shfl_sync(0xffffffffu, acc, 0);
    float r = rsqrtf(acc / cols + 1e-6f);
    float4* out = reinterpret_cast<float4*>(y) + (size_t)row * (cols / 4);
    const float4* w4 = reinterpret_cast<const float4*>(w);
#pragma unroll
    for (int k = 0; k < V; ++k) {
        float4 g = w4[k * 32 + lane];
        out[k * 32 + lane] = make_float4(vals[k].x * r * g.x, vals[k].y * r * g.y, vals[k].z * r * g.z, vals[k].w * r * g.w);
    }
}
template __global__ void rmsnorm_reg<8>(const float*, const float*, float*, int, int);
