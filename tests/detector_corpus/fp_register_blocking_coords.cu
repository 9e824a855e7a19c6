// features: coalesced_access
// case: a per-thread `int coords[3]` of grid coordinates, no accumulation of products (issue 13:
// register_blocking fired on it).
__global__ void voxel_ids(const float* px, const float* py, const float* pz, int* ids, float cell, int dim, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int coords[3];
    coords[0] = min(dim - 1, max(0, (int)(px[i] / cell)));
    coords[1] = min(dim - 1, max(0, (int)(py[i] / cell)));
    coords[2] = min(dim - 1, max(0, (int)(pz[i] / cell)));
    ids[i] = (coords[2] * dim + coords[1]) * dim + coords[0];
}
