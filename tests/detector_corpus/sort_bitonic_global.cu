// features: coalesced_access
// case: one bitonic compare-exchange step per launch over global memory (the partner index is i ^ j).
__global__ void bitonic_step(unsigned* keys, int j, int k, int n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned ixj = i ^ j;
    if (i >= (unsigned)n || ixj <= i || ixj >= (unsigned)n) return;
    bool up = (i & k) == 0;
    unsigned a = keys[i], b = keys[ixj];
    if ((a > b) == up) { keys[i] = b; keys[ixj] = a; }
}
void bitonic_sort(unsigned* keys, int n) {
    for (int k = 2; k <= n; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) bitonic_step<<<(n + 255) / 256, 256>>>(keys, j, k, n);
}
