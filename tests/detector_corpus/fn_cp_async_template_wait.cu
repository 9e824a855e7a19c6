// features: smem_tiling, cp_async, double_buffering, coalesced_access, loop_unrolling
// arch: sm_80
// case: a three-stage cp.async ring in the style of hand-written SGEMMs: PTX wrappers whose wait count is
// a template operand (`cp.async.wait_group %0`), the tile filled by cp.async only (never by an assignment).
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
    unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gmem));
}
constexpr int TILE = 32, STAGES = 3;
__global__ void matmul_cp_async_ring(const float* A, const float* B, float* C, int n) {
    __shared__ float As[STAGES][TILE][TILE];
    __shared__ float Bs[STAGES][TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    const int tiles = n / TILE;
    for (int s = 0; s < STAGES - 1 && s < tiles; ++s) {
        cp_async4(&As[s][ty][tx], &A[row * n + s * TILE + tx]);
        cp_async4(&Bs[s][ty][tx], &B[(s * TILE + ty) * n + col]);
        cp_async_commit();
    }
    float acc = 0.f;
    for (int t = 0; t < tiles; ++t) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const int nt = t + STAGES - 1;
        if (nt < tiles) {
            cp_async4(&As[nt % STAGES][ty][tx], &A[row * n + nt * TILE + tx]);
            cp_async4(&Bs[nt % STAGES][ty][tx], &B[(nt * TILE + ty) * n + col]);
        }
        cp_async_commit();
        const int cur = t % STAGES;
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[cur][ty][k] * Bs[cur][k][tx];
    }
    C[row * n + col] = acc;
}
