// features: reduced_precision, coalesced_access
// case: scaling in half2 pairs where the tolerance allows 1e-3.
#include <cuda_fp16.h>
__global__ void scale_h2(const float2* in, float2* out, float a, int n2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n2) return;
    float2 v = in[i];
    __half2 h = __float22half2_rn(v);
    h = __hmul2(h, __float2half2_rn(a));
    out[i] = __half22float2(h);
}
