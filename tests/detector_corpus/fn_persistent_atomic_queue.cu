// features: persistent_kernel, coalesced_access
// case: a persistent kernel on a fixed grid that pulls tiles from an atomic work queue (issue 13: missed,
// the detector wanted an SM-count query and a blockIdx-stride loop).
#define TILE 1024
__global__ void process_queue(const float* in, float* out, int ntiles, unsigned int* next_tile) {
    __shared__ unsigned int tile;
    while (true) {
        if (threadIdx.x == 0) tile = atomicAdd(next_tile, 1u);
        __syncthreads();
        if (tile >= (unsigned)ntiles) break;
        for (int j = threadIdx.x; j < TILE; j += blockDim.x) out[tile * TILE + j] = sqrtf(fabsf(in[tile * TILE + j]));
        __syncthreads();
    }
}
void launch_queue(const float* in, float* out, int ntiles, unsigned int* counter) {
    process_queue<<<264, 256>>>(in, out, ntiles, counter);
}
