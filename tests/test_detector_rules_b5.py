"""Rules written from the definitions in docs/features.md after a reading of the whole tuning data (batches 1-4):
each with a small kernel written for it that the detector must find and a near miss it must not, labelled from
the definitions before the detector ran. Kernels checked with their build are compiled with nvcc (skipped
without it)."""

from __future__ import annotations

from cuda_llm.feature_db import detect_features, load_catalogue
from test_detector_rules import built

CATALOGUE = load_catalogue()


def _one(feature: str, source: str, kernels=(), sass=None) -> bool:
    return feature in detect_features(source, kernels, [f for f in CATALOGUE if f.id == feature], sass=sass)


# ---------------------------------------------------------------------------------------- reduced_precision
# a reduction templated on its element type, half handled in a branch the float build never takes
TEMPLATE_BRANCH = """
#include <cuda_fp16.h>
#include <type_traits>
template <typename T>
__device__ T zero() {
    if constexpr (std::is_same_v<T, half2>) { return make_half2(0.0f, 0.0f); }
    else { return T(0); }
}
template <typename T>
__global__ void sum_rows(const T* x, T* out, int n) {
    T s = zero<T>();
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[blockIdx.x * n + i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
template __global__ void sum_rows<float>(const float*, float*, int);
"""

HALF_SCALE = """
#include <cuda_fp16.h>
__global__ void scale_half(const half* x, half* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half(a * __half2float(x[i]));
}
"""


def test_half_named_only_in_a_branch_the_build_never_takes_is_not_reduced_precision(tmp_path):
    assert _one("reduced_precision", TEMPLATE_BRANCH)          # the source alone: the half2 branch counts
    kernels, sass = built(tmp_path, TEMPLATE_BRANCH)
    assert not _one("reduced_precision", TEMPLATE_BRANCH, kernels, sass)
    kernels, sass = built(tmp_path, HALF_SCALE)
    assert _one("reduced_precision", HALF_SCALE, kernels, sass)


# ---------------------------------------------------------------------------------------------- vector_loads
# scalar global loads staged in shared memory, read back through a 128-bit cast of the shared address
SHARED_VECTOR_CAST = """
__global__ void stage_rows(const float* x, float* y, int n) {
    __shared__ __align__(16) float tile[256];
    tile[threadIdx.x] = x[blockIdx.x * 256 + threadIdx.x];
    __syncthreads();
    if (threadIdx.x < 64) {
        float4 v = ((float4 *)(tile))[threadIdx.x];
        y[blockIdx.x * 64 + threadIdx.x] = v.x + v.y + v.z + v.w;
    }
}
"""

GLOBAL_VECTOR_CAST = """
__global__ void sum4(const float* x, float* y, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = ((const float4 *)(x))[i];
        y[i] = v.x + v.y + v.z + v.w;
    }
}
"""


def test_a_vector_cast_of_a_shared_address_is_no_vector_load_where_the_build_shows_none(tmp_path):
    assert _one("vector_loads", SHARED_VECTOR_CAST)            # the source alone cannot tell the space
    kernels, sass = built(tmp_path, SHARED_VECTOR_CAST)
    assert not _one("vector_loads", SHARED_VECTOR_CAST, kernels, sass)
    kernels, sass = built(tmp_path, GLOBAL_VECTOR_CAST)
    assert _one("vector_loads", GLOBAL_VECTOR_CAST, kernels, sass)
