// features: coalesced_access
// case: naive histogram: one global atomic per element.
__global__ void histo_global(const unsigned int* data, unsigned int* bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[data[i] % 256u], 1u);
}
