"""The texts the detectors' source rules read (feature_db/source_views.py) and the build rules (SASS,
kernel count): one kernel at a time, macros expanded, the usual spellings of the thread index and loop
counters written one way, SASS rules silent when the machine code is unknown."""

from __future__ import annotations

from cuda_llm.feature_db import detect_features, load_catalogue
from cuda_llm.feature_db.detect import rule_matches
from cuda_llm.feature_db.model import Detector, Feature, ResourceRule, SassRule, SourceRule
from cuda_llm.feature_db.source_views import canonical, expand_macros, kernel_bodies, kernel_views, split_source
from cuda_llm.results import KernelResources, SassSummary

CATALOGUE = load_catalogue()

TWO_KERNELS = """#define TILE 16
#define LOAD(r, c) tile[r][c] = A[(r) * n + (c)]
__global__ void first(const float* A, float* out, int n);
__global__ void first(const float* A, float* out, int n) {
    __shared__ float tile[TILE][TILE];
    LOAD(threadIdx.y, threadIdx.x);
    __syncthreads();
    out[0] = tile[0][0];
}
__global__ void second(float* out) { asm volatile("cp.async.wait_group %0;" :: "n"(1)); out[0] = 1.f; }
"""


def test_kernel_bodies_skip_declarations_and_views_blank_the_other_kernels():
    code = split_source(TWO_KERNELS).code
    bodies = kernel_bodies(code)
    assert len(bodies) == 2 and code[bodies[0][0]] == "{" and code[bodies[1][1] - 1] == "}"
    first, second = kernel_views(TWO_KERNELS)
    assert "__shared__" in first.code and "cp.async" not in first.asm
    assert "__shared__" not in second.code and "cp.async.wait_group" in second.asm
    assert first.file == second.file and "__shared__" in first.file


def test_macros_are_expanded_on_their_line_and_definitions_blanked():
    out = expand_macros(split_source(TWO_KERNELS).code)
    assert "__shared__ float tile[16][16];" in out
    assert "tile[threadIdx.y][threadIdx.x] = A[(threadIdx.y) * n + (threadIdx.x)];" in out
    assert "#define" not in out and out.count("\n") == TWO_KERNELS.count("\n")
    assert expand_macros("int x = 1;\n") == ""


def test_thread_index_aliases_lanes_and_loop_types_are_written_one_way():
    src = ("for (uint i = 0; i < n; ++i) for (size_t j = 0; ;) for (auto k = 0; ;)\n"
           "const int tid = threadIdx.x; int lane = tid & 31; y[row * n + lane] = 0; f(threadIdx.x % 32);\n"
           "int c = blockIdx.x * B + (threadIdx.x % B); z[(int)threadIdx.x] = 0; int g = lane & 3; tid = 4;")
    out = canonical(src)
    assert out.count("for (int ") == 3
    assert "y[row * n + threadIdx.x]" in out and "f(threadIdx.x)" in out
    assert "int c = blockIdx.x * B + threadIdx.x;" in out and "z[threadIdx.x]" in out
    assert "int g = threadIdx.x & 3" in out           # a quad index is not a lane: left alone
    assert "tid = 4" in out                            # an assignment to the alias is not a use


def _feature(rule) -> Feature:
    base = next(f for f in CATALOGUE if f.id == "cp_async")
    return base.model_copy(update={"detector": Detector(any_of=[rule])})


def test_sass_rules_read_full_opcodes_and_never_match_without_the_build():
    rule = SassRule(sass=r"^(?:LDG|STG)\b.*\.128\b", min_count=2)
    two = SassSummary(ops={"LDG.E.128.CONSTANT": 1, "STG.E.128": 1, "LDG.E": 9})
    views = kernel_views("__global__ void k() {}")[0]
    assert rule_matches(rule, views, [], two)
    assert not rule_matches(rule, views, [], SassSummary(ops={"LDG.E.128": 1, "LDG.E.64": 5}))
    assert not rule_matches(rule, views, [], None)
    f = _feature(SassRule(sass="^LDGSTS"))
    assert detect_features("__global__ void k() { opaque_copy(); }", (), [f], sass=SassSummary(ops={"LDGSTS.E.BYPASS.128": 4})) == {"cp_async"}
    assert detect_features("__global__ void k() { opaque_copy(); }", (), [f]) == set()


def test_kernel_count_and_file_scope():
    ks = [KernelResources(name="a"), KernelResources(name="b")]
    views = kernel_views(TWO_KERNELS)
    assert rule_matches(ResourceRule(resource="kernels", op=">=", value=2), views[0], ks)
    assert not rule_matches(ResourceRule(resource="kernels", op=">=", value=2), views[0], [])
    across = SourceRule(source=r"__shared__[\s\S]*cp\.async", scope="file")
    assert not rule_matches(SourceRule(source=r"__shared__[\s\S]*asm volatile"), views[0], [])
    assert rule_matches(SourceRule(source=r"__shared__[\s\S]*asm volatile", scope="file"), views[0], [])
    assert not rule_matches(across, views[0], [])     # string literals are blanked in the code views


def test_a_parameter_every_call_passes_the_thread_index_to_reads_as_it():
    src = """__device__ void load(const float* B, float* Bs, int row, int col) { Bs[row * 64 + col] = B[row * 512 + col * 4]; }
__device__ void other(const float* B, int col) { float x = B[col * 512]; }
__global__ void k(const float* B) {
    __shared__ float Bs[64 * 64];
    const uint innerColB = threadIdx.x % (64 / 4);
    load(B, Bs, threadIdx.y, innerColB);
    other(B, 3);
    other(B, innerColB);
}"""
    out = kernel_views(src)[0].expanded
    assert "B[row * 512 + threadIdx.x * 4]" in out          # every call passes it
    assert "B[col * 512]" in out                             # one call passes a constant
    assert "coalesced_access" in detect_features(src)


def test_branches_the_file_does_not_compile_are_blanked():
    from cuda_llm.feature_db.source_views import drop_inactive_branches

    src = ("#define HAVE_HALF\n#if defined(ENABLE_BF16)\ntypedef __nv_bfloat16 T;\n#elif defined(HAVE_HALF)\n"
           "typedef half T;\n#else\ntypedef float T;\n#endif\n#ifdef __CUDA_ARCH__\nint a;\n#else\nint b;\n#endif\n"
           "#if 0\nint dead;\n#endif\n")
    out = drop_inactive_branches(src)
    assert "__nv_bfloat16" not in out and "typedef half T;" in out and "typedef float" not in out
    assert "int a;" in out and "int b;" in out          # __CUDA_ARCH__: the file cannot tell, both kept
    assert "dead" not in out and out.count("\n") == src.count("\n")
    kernel = "#if defined(ENABLE_BF16)\ntypedef __nv_bfloat16 T;\n#else\ntypedef float T;\n#endif\n" \
             "__global__ void k(T* x) { x[threadIdx.x] = x[threadIdx.x] * 2; }\n"
    assert "reduced_precision" not in detect_features(kernel)
    assert "reduced_precision" in detect_features("#define ENABLE_BF16\n" + kernel)


def test_an_alias_ends_where_its_name_is_declared_again():
    # `i` holds the thread index until the loop declares another `i`: that loop's counter is not the index
    code = canonical("""__global__ void k(const float* x, float* y, int n, int stride) {
    int i = threadIdx.x;
    y[i] = x[i];
    float acc = 0.f;
    for (int i = 1; i < n; i++) acc += x[i * stride];
    y[n + i] = acc;
}""")
    assert "y[threadIdx.x] = x[threadIdx.x]" in code
    assert "x[i * stride]" in code and "x[threadIdx.x * stride]" not in code
