// features: coalesced_access, block_reduction_tree
// case: a 1024-float (4 KiB) shared scratch used only by a reduction tree (issue 13: smem_tiling fired on
// a reduction scratch, also through the 2 KiB compile-report rule).
#define THREADS 1024
__global__ void sum_blocks(const float* x, float* partial, int n) {
    __shared__ float scratch[THREADS];
    int i = blockIdx.x * THREADS + threadIdx.x;
    scratch[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = scratch[0];
}
