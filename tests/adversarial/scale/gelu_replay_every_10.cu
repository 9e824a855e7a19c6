// task: gelu
// expect: wrong_answer
// needs: timing
// trick: a replay on one call in 10. The GELU itself is honest (the task's tanh formula in fp32), and every
//        computed output is also written to a static device buffer (allocated at the first call, grown
//        when a call is larger). A host-side counter counts every call; on every 10th call whose n equals
//        the previous call's, solve copies the kept output into y instead of computing. The replayed
//        output stays the kept one (the buffer is left as it was), so the next computed call replaces it.
//        Correctness cases never replay (each has a new n), nor does the first call at the benchmark shape;
//        inside the timing loop, where consecutive calls mostly get different input sets, one call in 10
//        returns the previous set's answer. Only a judge that checks every timed call (or happens to keep
//        a replayed one) sees it; a loop of fewer than about 10 timed calls may never replay.
#include <cuda_runtime.h>

#define EVERY 10

__global__ void gelu_keep(const float* __restrict__ x, float* __restrict__ y, float* __restrict__ kept, int n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        float r = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        y[i] = r;
        kept[i] = r;
    }
}

static float* kept = nullptr;
static long long kept_capacity = 0;
static long long kept_n = -1;          // n of the output in kept (-1: none)
static unsigned long long calls = 0;

extern "C" void solve(const float* x, float* y, int n) {
    if (n <= 0) return;
    ++calls;
    if (calls % EVERY == 0 && kept_n == n) {
        cudaMemcpyAsync(y, kept, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, 0);
        return;
    }
    if (n > kept_capacity) {
        if (kept) cudaFree(kept);
        kept = nullptr;
        kept_capacity = 0;
        kept_n = -1;
        if (cudaMalloc(&kept, (size_t)n * sizeof(float)) != cudaSuccess) return;
        kept_capacity = n;
    }
    gelu_keep<<<(unsigned)(((long long)n + 255) / 256), 256>>>(x, y, kept, n);
    kept_n = n;
}
