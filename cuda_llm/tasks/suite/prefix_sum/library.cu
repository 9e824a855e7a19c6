// Library yardstick (never offered to the LLM): cub::DeviceScan::InclusiveSum on the default stream.
// The temporary storage is a static device buffer, grown when a larger call needs more and kept
// between calls, so that timed calls do not allocate.
#include <cuda_runtime.h>
#include <cub/device/device_scan.cuh>

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

extern "C" void solve(const int* x, int* y, int n) {
    if (n <= 0) return;
    size_t bytes = 0;
    cub::DeviceScan::InclusiveSum(nullptr, bytes, x, y, n);
    void* tmp = scratch(bytes < 1 ? 1 : bytes);
    if (tmp == nullptr) return;
    cub::DeviceScan::InclusiveSum(tmp, bytes, x, y, n);
}
