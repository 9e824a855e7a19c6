// Library yardstick (never offered to the LLM): cub::DeviceHistogram::HistogramEven on the default
// stream. Values lie in [0, bins): bins + 1 evenly spaced levels 0, 1, ..., bins give one bin per
// integer value (CUB's upper level is exclusive). CUB zeroes the histogram itself. The temporary
// storage is a static device buffer, grown when needed and kept between calls.
#include <cuda_runtime.h>
#include <cub/device/device_histogram.cuh>

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

extern "C" void solve(const int* x, int* hist, int n, int bins) {
    if (bins <= 0) return;
    if (n <= 0) {
        cudaMemset(hist, 0, sizeof(int) * (size_t)bins);
        return;
    }
    size_t bytes = 0;
    cub::DeviceHistogram::HistogramEven(nullptr, bytes, x, hist, bins + 1, 0, bins, n);
    void* tmp = scratch(bytes < 1 ? 1 : bytes);
    if (tmp == nullptr) return;
    cub::DeviceHistogram::HistogramEven(tmp, bytes, x, hist, bins + 1, 0, bins, n);
}
