// features: cuda_graphs, coalesced_access
// case: a solve of two kernels replayed from a graph captured on the first call.
#include <cuda_runtime.h>
__global__ void square(const float* x, float* t, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) t[i] = x[i] * x[i]; }
__global__ void add_one(const float* t, float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = t[i] + 1.f; }
extern "C" void solve(const float* x, float* t, float* y, int n) {
    static cudaGraphExec_t exec = nullptr;
    static cudaStream_t s = nullptr;
    if (!s) cudaStreamCreate(&s);
    if (!exec) {
        cudaGraph_t g;
        cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
        square<<<(n + 255) / 256, 256, 0, s>>>(x, t, n);
        add_one<<<(n + 255) / 256, 256, 0, s>>>(t, y, n);
        cudaStreamEndCapture(s, &g);
        cudaGraphInstantiate(&exec, g, 0);
    }
    cudaGraphLaunch(exec, s);
}
