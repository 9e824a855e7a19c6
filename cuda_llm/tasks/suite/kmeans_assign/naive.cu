// Naive baseline: one thread per point; loops over every centroid and dimension in global memory,
// keeping the smallest squared distance (strictly smaller wins, so ties go to the lowest index).
#include <cuda_runtime.h>

__global__ void assign_kernel(const float* points, const float* centroids, int* labels, int n, int k, int d) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float* p = points + (size_t)i * d;
    float best = INFINITY;
    int best_c = 0;
    for (int c = 0; c < k; ++c) {
        const float* q = centroids + (size_t)c * d;
        float dist = 0.0f;
        for (int t = 0; t < d; ++t) {
            float diff = p[t] - q[t];
            dist += diff * diff;
        }
        if (dist < best) {
            best = dist;
            best_c = c;
        }
    }
    labels[i] = best_c;
}

extern "C" void solve(const float* points, const float* centroids, int* labels, int n, int k, int d) {
    if (n <= 0) return;
    int threads = 256;
    int blocks = (n + threads - 1) / threads;
    assign_kernel<<<blocks, threads>>>(points, centroids, labels, n, k, d);
}
