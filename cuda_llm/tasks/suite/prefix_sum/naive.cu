// Naive baseline: the textbook three-phase scan. Each block of 512 threads scans its 512 elements in
// shared memory (Hillis-Steele, log2(512) steps) and writes its total to a block-sums array; the
// block sums are scanned the same way (recursively, until one block holds them all); then every
// element of block b > 0 gets the scanned sum of blocks 0..b-1 added. The block-sums arrays live in
// one device buffer that is allocated on first use and grown when a larger n needs more.
#include <cuda_runtime.h>

#define BLOCK 512

__global__ void scan_blocks(const int* in, int* out, int* block_sums, int n) {
    __shared__ int s[BLOCK];
    long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    s[threadIdx.x] = i < n ? in[i] : 0;
    __syncthreads();
    for (int offset = 1; offset < BLOCK; offset <<= 1) {
        int add = threadIdx.x >= offset ? s[threadIdx.x - offset] : 0;
        __syncthreads();
        s[threadIdx.x] += add;
        __syncthreads();
    }
    if (i < n) out[i] = s[threadIdx.x];
    if (block_sums != nullptr && threadIdx.x == BLOCK - 1) block_sums[blockIdx.x] = s[BLOCK - 1];
}

__global__ void add_offsets(int* y, const int* scanned_sums, int n) {
    if (blockIdx.x == 0) return;
    long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) y[i] += scanned_sums[blockIdx.x - 1];
}

static int num_blocks(int n) { return (n - 1) / BLOCK + 1; }

// Ints needed for the block sums of every level above n.
static size_t scratch_ints(int n) {
    size_t total = 0;
    while (n > BLOCK) {
        n = num_blocks(n);
        total += (size_t)n;
    }
    return total;
}

static int* scratch(size_t ints) {
    static int* buf = nullptr;
    static size_t cap = 0;
    if (ints > cap) {
        if (buf != nullptr) cudaFree(buf);
        buf = nullptr;
        cap = 0;
        if (cudaMalloc(&buf, ints * sizeof(int)) != cudaSuccess) return nullptr;
        cap = ints;
    }
    return buf;
}

// Scan n ints from in to out (in may equal out); sums is room for scratch_ints(n) ints.
static void scan(const int* in, int* out, int n, int* sums) {
    int blocks = num_blocks(n);
    if (blocks == 1) {
        scan_blocks<<<1, BLOCK>>>(in, out, nullptr, n);
        return;
    }
    scan_blocks<<<blocks, BLOCK>>>(in, out, sums, n);
    scan(sums, sums, blocks, sums + blocks);
    add_offsets<<<blocks, BLOCK>>>(out, sums, n);
}

extern "C" void solve(const int* x, int* y, int n) {
    if (n <= 0) return;
    size_t need = scratch_ints(n);
    int* sums = scratch(need > 0 ? need : 1);
    if (sums == nullptr) return;
    scan(x, y, n, sums);
}
