"""Rules of the tiling and memory features (tiling, pipelining, padding, register blocking, coalescing,
async copies, precision, vector and read-only loads, tensor cores), each with a kernel written for the test
that it must find and a near miss it must not (see tests/test_detector_rules.py)."""

from __future__ import annotations

from cuda_llm.feature_db import detect_features, load_catalogue
from cuda_llm.feature_db.source_views import drop_unused_macros

CATALOGUE = {f.id: f for f in load_catalogue()}


def found(feature: str, source: str, build=None) -> bool:
    kernels, sass = build if build is not None else ((), None)
    return feature in detect_features(source, kernels, [CATALOGUE[feature]], sass=sass)


# ---------------------------------------------------------------------------------------- unused macros
MACROS = """#define HALF2(v) (reinterpret_cast<half2 *>(&(v))[0])
#define FLOAT4(v) (reinterpret_cast<float4 *>(&(v))[0])
#define BULK_COMMIT() asm volatile("cp.async.bulk.commit_group;\\n" ::)
#define LOAD4(v) FLOAT4(v)
__global__ void add(float* a, float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""


def test_a_macro_no_code_uses_counts_for_nothing():
    for feature in ("reduced_precision", "vector_loads", "tma_bulk_copy"):
        assert not found(feature, MACROS), feature
    used = MACROS.replace("c[i] = a[i] + b[i];", "LOAD4(c[4 * i]) = LOAD4(a[4 * i]);")
    assert found("vector_loads", used)              # used through another macro: it counts
    assert not found("reduced_precision", used)
    calls = MACROS.replace("c[i] = a[i] + b[i];", "{ c[i] = a[i]; BULK_COMMIT(); }")
    assert found("tma_bulk_copy", calls)


def test_unused_macros_are_blanked_in_place_and_flags_kept():
    text = "#define FLAG\n#define USED 4\n#define UNUSED(x) (x * 2)\nint a = USED;\n"
    out = drop_unused_macros(text)
    assert len(out) == len(text) and "UNUSED" not in out and "#define USED 4" in out and "#define FLAG" in out


# ---------------------------------------------------------------------------------------- readonly_cache
def test_a_const_restrict_pointer_is_read_only_and_one_written_in_place_is_not():
    reads = """__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.f * x[i];
}"""
    assert found("readonly_cache", reads)
    assert found("readonly_cache", reads.replace("const float* __restrict__ x", "float const* __restrict x"))
    in_place = """__global__ void scale(float* __restrict__ x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 2.f * x[i];
}"""
    assert not found("readonly_cache", in_place)
