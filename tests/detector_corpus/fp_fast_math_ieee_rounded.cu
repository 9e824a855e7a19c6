// features: coalesced_access, readonly_cache
// case: IEEE-rounded intrinsics (__frcp_rn, __fdiv_rn, __fsqrt_rn) are exact, not fast math (issue 13:
// fast_math_intrinsics fired on __frcp_rn).
__global__ void normalize_exact(const float* __restrict__ x, const float* __restrict__ n2, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __fdiv_rn(x[i], __fsqrt_rn(n2[i])) * __frcp_rn(1.0f + n2[i]);
}
