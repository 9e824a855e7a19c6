// features: loop_unrolling, grid_stride_loop, coalesced_access, readonly_cache
// case: a grid-stride loop unrolled by hand: four independent loads per step, then the tail.
__global__ void sum_sq_unrolled(const float* __restrict__ x, float* out, int n) {
    int stride = blockDim.x * gridDim.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a = 0.f, b = 0.f, c = 0.f, d = 0.f;
    for (; i + 3 * stride < n; i += 4 * stride) {
        float p = x[i], q = x[i + stride], r = x[i + 2 * stride], s = x[i + 3 * stride];
        a += p * p; b += q * q; c += r * r; d += s * s;
    }
    for (; i < n; i += stride) a += x[i] * x[i];
    atomicAdd(out, a + b + c + d);
}
