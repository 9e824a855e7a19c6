// features: coalesced_access
// case: scan in three kernels with the block totals scanned serially and added back: two extra passes.
#define BS 512
__global__ void scan_blocks(const int* in, int* out, int* sums, int n) {
    __shared__ int s[BS];
    int i = blockIdx.x * BS + threadIdx.x;
    s[threadIdx.x] = i < n ? in[i] : 0;
    __syncthreads();
    for (int d = 1; d < BS; d <<= 1) {
        int v = threadIdx.x >= d ? s[threadIdx.x - d] : 0;
        __syncthreads();
        s[threadIdx.x] += v;
        __syncthreads();
    }
    if (i < n) out[i] = s[threadIdx.x];
    if (threadIdx.x == BS - 1) sums[blockIdx.x] = s[BS - 1];
}
__global__ void scan_sums(int* sums, int m) {
    if (threadIdx.x == 0 && blockIdx.x == 0)
        for (int b = 1; b < m; ++b) sums[b] += sums[b - 1];
}
__global__ void add_offsets(int* out, const int* sums, int n) {
    int i = blockIdx.x * BS + threadIdx.x;
    if (blockIdx.x > 0 && i < n) out[i] += sums[blockIdx.x - 1];
}
