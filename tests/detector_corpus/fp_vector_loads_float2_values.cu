// features: coalesced_access
// case: complex multiply with float2 as a value type; every load is a scalar float (issue 13:
// vector_loads fired on any float2).
__global__ void complex_scale(const float* re, const float* im, float* out_re, float* out_im, float wr, float wi, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float2 z = make_float2(re[i], im[i]);
    float2 w = make_float2(wr, wi);
    float2 p = make_float2(z.x * w.x - z.y * w.y, z.x * w.y + z.y * w.x);
    out_re[i] = p.x;
    out_im[i] = p.y;
}
