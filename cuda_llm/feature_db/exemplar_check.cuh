// Put before an exemplar and its `check` (catalogue/*.toml) to make one self-checking program: the check's
// main() runs the exemplar on the GPU, compares with a CPU computation and prints PASS (exit 0) or FAIL.
// tests/test_exemplars_gpu.py builds and runs every one; tests/test_feature_db.py compiles them with nvcc.
#include <cuda_runtime.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            std::printf("CUDA error %s at line %d: %s\n", cudaGetErrorName(e_), __LINE__,         \
                        cudaGetErrorString(e_));                                                   \
            std::exit(2);                                                                          \
        }                                                                                          \
    } while (0)

// Device copies padded by 64 bytes, so a vectorized tail read past n stays inside the allocation.
template <class T> T* to_device(const std::vector<T>& h) {
    T* d = nullptr;
    CK(cudaMalloc(&d, h.size() * sizeof(T) + 64));
    CK(cudaMemset(d, 0, h.size() * sizeof(T) + 64));
    CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

template <class T> T* device_zeros(size_t n) {
    T* d = nullptr;
    CK(cudaMalloc(&d, n * sizeof(T) + 64));
    CK(cudaMemset(d, 0, n * sizeof(T) + 64));
    return d;
}

template <class T> std::vector<T> to_host(const T* d, size_t n) {
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<T> h(n);
    CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

// Reproducible values in [lo, hi) (a small LCG: the same on every machine).
inline std::vector<float> random_floats(size_t n, float lo = -1.0f, float hi = 1.0f, unsigned seed = 1u) {
    std::vector<float> v(n);
    uint32_t s = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < n; ++i) {
        s = s * 1664525u + 1013904223u;
        v[i] = lo + (hi - lo) * ((s >> 8) * (1.0f / 16777216.0f));
    }
    return v;
}

inline std::vector<uint32_t> random_u32(size_t n, unsigned seed = 7u) {
    std::vector<uint32_t> v(n);
    uint32_t s = seed * 2654435761u + 99u;
    for (size_t i = 0; i < n; ++i) {
        s ^= s << 13; s ^= s >> 17; s ^= s << 5;
        v[i] = s;
    }
    return v;
}

// 0 when every |got - want| <= atol + rtol * |want|; else 1, printing the first mismatch.
inline int check_close(const char* what, const std::vector<float>& got, const std::vector<float>& want,
                       double rtol, double atol) {
    if (got.size() != want.size()) {
        std::printf("%s: %zu values, expected %zu\n", what, got.size(), want.size());
        return 1;
    }
    for (size_t i = 0; i < got.size(); ++i) {
        double g = got[i], w = want[i];
        if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w))) {
            std::printf("%s: element %zu is %.8g, expected %.8g\n", what, i, g, w);
            return 1;
        }
    }
    return 0;
}

template <class T> int check_equal(const char* what, const std::vector<T>& got, const std::vector<T>& want) {
    if (got.size() != want.size()) {
        std::printf("%s: %zu values, expected %zu\n", what, got.size(), want.size());
        return 1;
    }
    for (size_t i = 0; i < got.size(); ++i) {
        if (!(got[i] == want[i])) {
            std::printf("%s: element %zu is %lld, expected %lld\n", what, i, (long long)got[i], (long long)want[i]);
            return 1;
        }
    }
    return 0;
}

inline int finish(int failures) {
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::printf(failures ? "FAIL\n" : "PASS\n");
    return failures ? 1 : 0;
}
