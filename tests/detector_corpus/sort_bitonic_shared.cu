// features: coalesced_access
// case: bitonic sort of 1024-key tiles in place in shared memory (a sorting network, like a reduction scratch:
// not a reused input tile); the XOR partner index is not a bank swizzle.
#define N 1024
__global__ void bitonic_tile(unsigned* keys) {
    __shared__ unsigned s[N];
    unsigned t = threadIdx.x;
    s[t] = keys[blockIdx.x * N + t];
    __syncthreads();
    for (unsigned k = 2; k <= N; k <<= 1)
        for (unsigned j = k >> 1; j > 0; j >>= 1) {
            unsigned p = t ^ j;
            if (p > t) {
                bool up = (t & k) == 0;
                unsigned a = s[t], b = s[p];
                if ((a > b) == up) { s[t] = b; s[p] = a; }
            }
            __syncthreads();
        }
    keys[blockIdx.x * N + t] = s[t];
}
