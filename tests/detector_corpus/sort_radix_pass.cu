// features: radix_sort, privatized_atomics, coalesced_access
// case: the counting half of an 8-bit LSD radix pass: per-block digit histograms in shared memory.
__global__ void digit_counts(const unsigned* keys, unsigned* block_hist, int n, int shift) {
    __shared__ unsigned h[256];
    h[threadIdx.x] = 0;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&h[(keys[i] >> shift) & 0xFF], 1u);
    __syncthreads();
    block_hist[threadIdx.x * gridDim.x + blockIdx.x] = h[threadIdx.x];
}
