// features: warp_per_row, warp_shuffle, vector_loads, readonly_cache, coalesced_access
// case: GEMV with a warp per row reading float4s.
__global__ void gemv_vec4(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y, int M, int N) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= M) return;
    const float4* a4 = reinterpret_cast<const float4*>(A + (size_t)row * N);
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float sum = 0.f;
    for (int j = lane; j < N / 4; j += 32) {
        float4 a = a4[j], b = x4[j];
        sum += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, o);
    if (lane == 0) y[row] = sum;
}
