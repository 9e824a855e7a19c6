// Naive baseline: out[0] is zeroed, then one thread per element: each block of 256 threads sums its
// elements with a shared-memory tree and thread 0 adds the block's sum to out[0] with atomicAdd.
// Indices are 64-bit, so every n that fits an int works.
#include <cuda_runtime.h>

#define THREADS 256

__global__ void reduce_kernel(const float* x, float* out, int n) {
    __shared__ float partial[THREADS];
    long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
    partial[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

extern "C" void solve(const float* x, float* out, int n) {
    cudaMemsetAsync(out, 0, sizeof(float), 0);  // default stream, ordered before the kernel
    if (n <= 0) return;
    unsigned blocks = (unsigned)((n - 1) / THREADS + 1);
    reduce_kernel<<<blocks, THREADS>>>(x, out, n);
}
