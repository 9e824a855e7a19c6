// Naive baseline: one thread per body, looping over every body in global memory.
#include <cuda_runtime.h>

__global__ void nbody_kernel(const float* body, float* acc, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float* bi = body + 4 * (size_t)i;
    float xi = bi[0], yi = bi[1], zi = bi[2];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int j = 0; j < n; ++j) {
        const float* bj = body + 4 * (size_t)j;
        float dx = bj[0] - xi, dy = bj[1] - yi, dz = bj[2] - zi;
        float r2 = dx * dx + dy * dy + dz * dz + 0.01f;
        float inv = rsqrtf(r2);
        float s = bj[3] * inv * inv * inv;
        ax += dx * s;
        ay += dy * s;
        az += dz * s;
    }
    acc[3 * (size_t)i + 0] = ax;
    acc[3 * (size_t)i + 1] = ay;
    acc[3 * (size_t)i + 2] = az;
}

extern "C" void solve(const float* body, float* acc, int n) {
    if (n <= 0) return;
    int threads = 256;
    int blocks = (n + threads - 1) / threads;
    nbody_kernel<<<blocks, threads>>>(body, acc, n);
}
