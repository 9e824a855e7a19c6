// features: warp_per_row, warp_shuffle, readonly_cache, coalesced_access
// case: CSR SpMV "vector" kernel: a warp per row over its nonzeros.
__global__ void spmv_vector(const int* __restrict__ rowptr, const int* __restrict__ colidx, const float* __restrict__ vals,
                            const float* __restrict__ x, float* __restrict__ y, int rows) {
    int gwarp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (gwarp >= rows) return;
    float s = 0.f;
    for (int j = rowptr[gwarp] + lane; j < rowptr[gwarp + 1]; j += 32) s += vals[j] * __ldg(&x[colidx[j]]);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0) y[gwarp] = s;
}
