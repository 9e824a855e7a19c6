// features: vector_loads, coalesced_access, readonly_cache
// case: 2x2 max pooling reading two float4 rows per thread.
__global__ void maxpool2x2(const float* __restrict__ x, float* __restrict__ y, int H, int W) {
    int ox = (blockIdx.x * blockDim.x + threadIdx.x) * 2, oy = blockIdx.y, plane = blockIdx.z;
    if (ox >= W / 2) return;
    const float* base = x + ((size_t)plane * H + 2 * oy) * W + 2 * ox;
    float4 a = *reinterpret_cast<const float4*>(base);
    float4 b = *reinterpret_cast<const float4*>(base + W);
    float* out = y + ((size_t)plane * (H / 2) + oy) * (W / 2) + ox;
    out[0] = fmaxf(fmaxf(a.x, a.y), fmaxf(b.x, b.y));
    out[1] = fmaxf(fmaxf(a.z, a.w), fmaxf(b.z, b.w));
}
