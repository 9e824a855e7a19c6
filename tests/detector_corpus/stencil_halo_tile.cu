// features: smem_tiling, coalesced_access, readonly_cache
// case: 1-D 7-point stencil reading a shared tile with a halo of 3 on each side.
#define R 3
#define BS 256
__global__ void stencil1d(const float* __restrict__ in, float* __restrict__ out, int n) {
    __shared__ float tile[BS + 2 * R];
    int g = blockIdx.x * BS + threadIdx.x;
    int l = threadIdx.x + R;
    tile[l] = g < n ? in[g] : 0.f;
    if (threadIdx.x < R) {
        tile[l - R] = g >= R ? in[g - R] : 0.f;
        tile[l + BS] = g + BS < n ? in[g + BS] : 0.f;
    }
    __syncthreads();
    if (g >= n) return;
    float s = 0.f;
    for (int k = -R; k <= R; ++k) s += tile[l + k];
    out[g] = s / (2 * R + 1);
}
