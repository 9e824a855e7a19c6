"""Every timed call's output checked on the device: a comparison kernel the harness builds once per arch.

The timing loop keeps only a few outputs for the parent to check, so a memo that replays one call in ten
(wrong one time in ten for a user) was caught by luck. After every timed call, outside its events, the GPU
worker compares each output with the reference of the input set that call was given (held on the device)
by the same rule as validate.py: |got - want| <= atol + rtol * |want| with a finite reference, or exactly
equal (NaN never passes; integers with no tolerance compare as integers). The count of elements outside it
comes back with the call's timing event; a call with any is a wrong answer, named by its place in the loop.
This runs in the worker, beside candidate code: it adds to the parent's checks of the kept outputs (which
a candidate cannot reach), it does not replace them.

The library is compiled with the candidates' own build (compile_source, cached by source and arch) and
loaded by the worker through ctypes, as tensor_peak.py's kernels are.
"""

from __future__ import annotations

from cuda_llm.tools.compiler.compile import compile_source

# element types by code, as the host function takes them: worker_protocol.COMPARE_TYPES

SOURCE = r"""
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>

template <typename T> __device__ __forceinline__ double as_double(const T* p, long long i) { return (double)p[i]; }
template <> __device__ __forceinline__ double as_double<__half>(const __half* p, long long i) {
    return (double)__half2float(p[i]);
}
template <typename T> __device__ __forceinline__ long long as_int(const T* p, long long i) { return (long long)p[i]; }
template <> __device__ __forceinline__ long long as_int<__half>(const __half* p, long long i) { return 0; }
template <> __device__ __forceinline__ long long as_int<float>(const float* p, long long i) { return 0; }
template <> __device__ __forceinline__ long long as_int<double>(const double* p, long long i) { return 0; }

// Elements outside |got - want| <= atol + rtol * |want| (a finite reference), or not exactly equal, counted.
template <typename G, typename W>
__global__ void count_bad(const G* got, const W* want, long long n, double atol, double rtol, int exact,
                          unsigned long long* bad) {
    unsigned long long mine = 0;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        bool ok;
        if (exact) {
            ok = as_int<G>(got, i) == as_int<W>(want, i);
        } else {
            double g = as_double<G>(got, i), e = as_double<W>(want, i);
            double mag = fabs(e);
            ok = (fabs(g - e) <= atol + rtol * mag && mag < INFINITY) || g == e;
        }
        mine += ok ? 0 : 1;
    }
    // one atomic per block: a poisoned or wholly wrong output must not serialize millions of them
    __shared__ unsigned long long per_warp[32];
    for (int off = 16; off > 0; off >>= 1) mine += __shfl_down_sync(0xffffffffu, mine, off);
    if ((threadIdx.x & 31) == 0) per_warp[threadIdx.x >> 5] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long total = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) total += per_warp[w];
        if (total) atomicAdd(bad, total);
    }
}

static unsigned long long* d_bad = 0;
static int n_blocks = 0;

template <typename G, typename W>
static void launch(const void* got, const void* want, long long n, double atol, double rtol, int exact) {
    count_bad<G, W><<<n_blocks, 256>>>((const G*)got, (const W*)want, n, atol, rtol, exact, d_bad);
}

template <typename G>
static int dispatch_want(int want_type, const void* got, const void* want, long long n, double atol, double rtol,
                         int exact) {
    switch (want_type) {
        case 0: launch<G, float>(got, want, n, atol, rtol, exact); return 0;
        case 1: launch<G, __half>(got, want, n, atol, rtol, exact); return 0;
        case 2: launch<G, double>(got, want, n, atol, rtol, exact); return 0;
        case 3: launch<G, int>(got, want, n, atol, rtol, exact); return 0;
        case 4: launch<G, unsigned int>(got, want, n, atol, rtol, exact); return 0;
        case 5: launch<G, long long>(got, want, n, atol, rtol, exact); return 0;
        case 6: launch<G, unsigned char>(got, want, n, atol, rtol, exact); return 0;
    }
    return -2;
}

// The number of elements outside the tolerance, or -1 on a CUDA error, -2 on an unknown type. Runs on the
// legacy default stream and waits for its own result (the caller has synchronized the device before).
extern "C" long long cuda_llm_count_bad(const void* got, int got_type, const void* want, int want_type, long long n,
                                        double atol, double rtol, int exact) {
    if (n <= 0) return 0;
    if (!d_bad) {
        if (cudaMalloc(&d_bad, sizeof(unsigned long long)) != cudaSuccess) return -1;
        int dev = 0, sms = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        n_blocks = sms > 0 ? sms * 8 : 1024;
    }
    if (cudaMemsetAsync(d_bad, 0, sizeof(unsigned long long), 0) != cudaSuccess) return -1;
    int rc;
    switch (got_type) {
        case 0: rc = dispatch_want<float>(want_type, got, want, n, atol, rtol, exact); break;
        case 1: rc = dispatch_want<__half>(want_type, got, want, n, atol, rtol, exact); break;
        case 2: rc = dispatch_want<double>(want_type, got, want, n, atol, rtol, exact); break;
        case 3: rc = dispatch_want<int>(want_type, got, want, n, atol, rtol, exact); break;
        case 4: rc = dispatch_want<unsigned int>(want_type, got, want, n, atol, rtol, exact); break;
        case 5: rc = dispatch_want<long long>(want_type, got, want, n, atol, rtol, exact); break;
        case 6: rc = dispatch_want<unsigned char>(want_type, got, want, n, atol, rtol, exact); break;
        default: rc = -2;
    }
    if (rc) return rc;
    unsigned long long bad = 0;
    if (cudaGetLastError() != cudaSuccess) return -1;
    if (cudaMemcpy(&bad, d_bad, sizeof(bad), cudaMemcpyDeviceToHost) != cudaSuccess) return -1;
    return (long long)bad;
}
"""


def build(arch: str | None, *, fresh: bool = False) -> str:
    """The comparison library's shared object for ``arch`` (compiled once, then from the build cache;
    ``fresh``: compiled again, for an entry evicted under the caller)."""
    comp = compile_source(SOURCE, arch=arch, filename="device_compare.cu", cache=not fresh)
    if not comp.ok or not comp.so_path:
        raise RuntimeError(f"the harness's comparison kernel did not compile:\n{comp.errors}")
    return comp.so_path

