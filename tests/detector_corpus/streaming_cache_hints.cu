// features: cache_hints, coalesced_access, vector_loads
// case: a streaming copy-and-scale with evict-first float4 loads and stores.
__global__ void scale_stream(const float4* x, float4* y, float a, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 v = __ldcs(&x[i]);
    v.x *= a; v.y *= a; v.z *= a; v.w *= a;
    __stcs(&y[i], v);
}
