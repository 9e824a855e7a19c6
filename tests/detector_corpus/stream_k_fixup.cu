// features: stream_k, coalesced_access
// case: stream-K dot products: blocks split the (row, k-iteration) space evenly; partial rows meet in atomics.
#define KI 128
__global__ void gemv_stream_k(const float* A, const float* x, float* y, int rows, int cols) {
    int iters = (cols + KI - 1) / KI, total = rows * iters;
    int per = (total + gridDim.x - 1) / gridDim.x;
    int start = blockIdx.x * per, stop = min(total, start + per);
    for (int it = start; it < stop; ) {
        int row = it / iters, last = min(stop, (row + 1) * iters);
        float s = 0.f;
        for (; it < last; ++it) {
            int c = (it % iters) * KI + threadIdx.x;
            if (c < cols) s += A[(size_t)row * cols + c] * x[c];
        }
        atomicAdd(&y[row], s);
    }
}
