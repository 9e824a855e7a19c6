// features: smem_tiling, double_buffering, coalesced_access
// case: the next tile is loaded into registers while the current shared tile is used, then stored for the
// next iteration: double buffering through registers, two shared stages indexed by the tile parity.
#define T 128
__global__ void tiles_prefetched(const float* in, float* out, int tiles) {
    __shared__ float sh[2][T];
    const float* src = in + (size_t)blockIdx.x * tiles * T;
    sh[0][threadIdx.x] = src[threadIdx.x];
    __syncthreads();
    float acc = 0.f;
    for (int t = 0; t < tiles; ++t) {
        float next = t + 1 < tiles ? src[(t + 1) * T + threadIdx.x] : 0.f;
        for (int k = 0; k < T; k += 32) acc += sh[t & 1][(threadIdx.x + k) % T];
        sh[(t + 1) & 1][threadIdx.x] = next;
        __syncthreads();
    }
    out[blockIdx.x * T + threadIdx.x] = acc;
}
