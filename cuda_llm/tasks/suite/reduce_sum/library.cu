// Library yardstick (never offered to the LLM): cub::DeviceReduce::Sum on the default stream. The
// temporary storage is a static device buffer, grown when a larger call needs more and kept between
// calls, so that timed calls do not allocate.
#include <cuda_runtime.h>
#include <cub/device/device_reduce.cuh>

static void* scratch(size_t bytes) {
    static void* buf = nullptr;
    static size_t cap = 0;
    if (bytes > cap) {
        if (buf) cudaFree(buf);
        buf = nullptr;
        cap = 0;
        if (cudaMalloc(&buf, bytes) != cudaSuccess) return nullptr;
        cap = bytes;
    }
    return buf;
}

extern "C" void solve(const float* x, float* out, int n) {
    if (n <= 0) {
        cudaMemset(out, 0, sizeof(float));
        return;
    }
    size_t bytes = 0;
    cub::DeviceReduce::Sum(nullptr, bytes, x, out, n);
    void* tmp = scratch(bytes < 1 ? 1 : bytes);
    if (tmp == nullptr) return;
    cub::DeviceReduce::Sum(tmp, bytes, x, out, n);
}
