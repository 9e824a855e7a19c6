// task: gelu
// expect: wrong_answer|suspect
// needs: timing
// trick: launches the (correct) work on its own non-blocking stream and returns at once. Events recorded
//        on the default stream then time almost nothing, and a harness that reads y after synchronizing
//        only the default stream sees the poison. The harness must synchronize the whole device and
//        cross-check the host clock: hidden work makes the result wrong or suspect, never a fast win.
#include <cuda_runtime.h>

__global__ void gelu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

extern "C" void solve(const float* x, float* y, int n) {
    static cudaStream_t side = nullptr;
    if (side == nullptr) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    if (n <= 0) return;
    gelu_kernel<<<(n + 255) / 256, 256, 0, side>>>(x, y, n);
}
