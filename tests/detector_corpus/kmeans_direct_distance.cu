// features: none
// case: k-means assignment with direct squared differences, centroids from global memory.
__global__ void assign_direct(const float* pts, const float* cen, int* lab, int n, int k, int d) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float best = 3.4e38f;
    int arg = 0;
    for (int c = 0; c < k; ++c) {
        float dist = 0.f;
        for (int t = 0; t < d; ++t) { float diff = pts[i * d + t] - cen[c * d + t]; dist += diff * diff; }
        if (dist < best) { best = dist; arg = c; }
    }
    lab[i] = arg;
}
