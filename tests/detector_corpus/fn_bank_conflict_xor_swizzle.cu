// features: smem_tiling, bank_conflict_padding, coalesced_access
// case: a transpose tile with an XOR-swizzled column index instead of padding (issue 13: missed).
#define T 32
__global__ void transpose_swizzled(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[T][T];
    int tx = threadIdx.x, ty = threadIdx.y;
    int x = blockIdx.x * T + tx, y = blockIdx.y * T + ty;
    if (x < cols && y < rows) tile[ty][tx ^ ty] = in[y * cols + x];
    __syncthreads();
    x = blockIdx.y * T + tx;
    y = blockIdx.x * T + ty;
    if (x < rows && y < cols) out[y * rows + x] = tile[tx][ty ^ tx];
}
