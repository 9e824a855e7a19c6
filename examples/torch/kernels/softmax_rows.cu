// softmax over each row of logits (batch x classes): one block per row, the row maximum and the sum of
// exponentials reduced in shared memory, then the normalized outputs.
#include <cuda_runtime.h>
#include <math.h>

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ out, int classes) {
    __shared__ float red[256];
    const float* row = x + (size_t)blockIdx.x * classes;
    float* orow = out + (size_t)blockIdx.x * classes;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < classes; c += blockDim.x) m = fmaxf(m, row[c]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float sum = 0.0f;
    for (int c = threadIdx.x; c < classes; c += blockDim.x) sum += expf(row[c] - m);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.0f / red[0];
    for (int c = threadIdx.x; c < classes; c += blockDim.x) orow[c] = expf(row[c] - m) * inv;
}

extern "C" void solve(const float* logits, float* out, int batch, int classes) {
    if (batch <= 0 || classes <= 0) return;
    softmax_rows<<<batch, 256>>>(logits, out, classes);
}
