// features: block_rasterization, register_blocking, coalesced_access, readonly_cache, loop_unrolling
// case: Triton-style grouped program ids over a 1-D grid, 4 outputs per thread.
#define GROUP_M 8
__global__ void gemm_grouped(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                             int M, int N, int K) {
    int pid = blockIdx.x;
    int num_pid_m = (M + 63) / 64, num_pid_n = (N + 63) / 64;
    int num_pid_in_group = GROUP_M * num_pid_n;
    int group_id = pid / num_pid_in_group;
    int first_pid_m = group_id * GROUP_M;
    int group_size_m = min(num_pid_m - first_pid_m, GROUP_M);
    int pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m;
    int pid_n = (pid % num_pid_in_group) / group_size_m;
    int row = pid_m * 64 + threadIdx.y * 4, col = pid_n * 64 + threadIdx.x;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k = 0; k < K; ++k) {
        float b = col < N ? B[(size_t)k * N + col] : 0.f;
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[r] += (row + r < M ? A[(size_t)(row + r) * K + k] : 0.f) * b;
    }
    for (int r = 0; r < 4; ++r)
        if (row + r < M && col < N) C[(size_t)(row + r) * N + col] = acc[r];
}
