// features: smem_tiling, bank_conflict_padding, coalesced_access
// case: shared-memory transpose with a padded tile (33 columns).
__global__ void transpose_tile(const float* in, float* out, int h, int w) {
    __shared__ float t[32][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < w && y + j < h) t[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * w + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < h && y + j < w) out[(size_t)(y + j) * h + x] = t[threadIdx.x][threadIdx.y + j];
}
