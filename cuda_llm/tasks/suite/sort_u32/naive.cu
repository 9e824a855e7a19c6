// Naive baseline: bitonic sort in global memory. The keys are copied into a power-of-two scratch
// buffer padded with 0xFFFFFFFF (kept between calls, grown when needed), one kernel launch per
// compare-exchange step (log2(P) * (log2(P) + 1) / 2 launches), then the first n keys are copied out.
#include <cuda_runtime.h>

static unsigned int* g_buf = nullptr;
static size_t g_cap = 0;

__global__ void pad_kernel(unsigned int* buf, size_t from, size_t to) {
    size_t i = from + (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < to) buf[i] = 0xFFFFFFFFu;
}

__global__ void bitonic_step(unsigned int* buf, size_t j, size_t k, size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    size_t partner = i ^ j;
    if (partner > i) {
        unsigned int a = buf[i], b = buf[partner];
        bool ascending = (i & k) == 0;
        if ((a > b) == ascending) {
            buf[i] = b;
            buf[partner] = a;
        }
    }
}

extern "C" void solve(const unsigned int* keys_in, unsigned int* keys_out, int n) {
    if (n <= 0) return;
    size_t p = 1;
    while (p < (size_t)n) p <<= 1;
    if (p > g_cap) {
        if (g_buf) cudaFree(g_buf);
        cudaMalloc(&g_buf, p * sizeof(unsigned int));
        g_cap = p;
    }
    cudaMemcpy(g_buf, keys_in, (size_t)n * sizeof(unsigned int), cudaMemcpyDeviceToDevice);
    const int threads = 256;
    if (p > (size_t)n) {
        size_t pad = p - (size_t)n;
        pad_kernel<<<(unsigned int)((pad + threads - 1) / threads), threads>>>(g_buf, (size_t)n, p);
    }
    unsigned int blocks = (unsigned int)((p + threads - 1) / threads);
    for (size_t k = 2; k <= p; k <<= 1) {
        for (size_t j = k >> 1; j > 0; j >>= 1) {
            bitonic_step<<<blocks, threads>>>(g_buf, j, k, p);
        }
    }
    cudaMemcpy(keys_out, g_buf, (size_t)n * sizeof(unsigned int), cudaMemcpyDeviceToDevice);
}
