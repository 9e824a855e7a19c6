// Library yardstick (never offered to the LLM): cub::DeviceRadixSort::SortKeys (ascending, all 32 bits)
// on the default stream. keys_in is only read. The temporary storage is a static device buffer,
// grown when needed and kept between calls, so that timed calls do not allocate.
#include <cuda_runtime.h>
#include <cub/device/device_radix_sort.cuh>

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

extern "C" void solve(const unsigned int* keys_in, unsigned int* keys_out, int n) {
    if (n <= 0) return;
    size_t bytes = 0;
    cub::DeviceRadixSort::SortKeys(nullptr, bytes, keys_in, keys_out, n);
    void* tmp = scratch(bytes < 1 ? 1 : bytes);
    if (tmp == nullptr) return;
    cub::DeviceRadixSort::SortKeys(tmp, bytes, keys_in, keys_out, n);
}
