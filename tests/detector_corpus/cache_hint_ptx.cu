// features: cache_hints, coalesced_access
// case: L1::no_allocate loads through inline PTX for data read once.
__device__ float load_no_l1(const float* p) {
    float v;
    asm volatile("ld.global.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}
__global__ void copy_no_l1(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = load_no_l1(x + i);
}
