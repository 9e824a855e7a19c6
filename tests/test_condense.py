"""Condensing nvcc logs for an LLM. The logs below were captured from nvcc 13.0 (sm_90); the compile
tests check the same path end to end with the real compiler."""

from __future__ import annotations

from cuda_llm.tools.compiler.condense import condense_errors, extract_warnings

MANY_SRC = """#include <cuda_runtime.h>
template <typename T>
__global__ void k(T* y, int n) {
    y[0] = missing_a;
}
__global__ void k2(float* y) { y[0] = missing_b; y[1] = missing_c; y[2] = missing_d; y[3] = missing_e; y[4] = missing_f; }
extern "C" void solve(float* y, int n) { k<float><<<1,1>>>(y, n); k2<<<1,1>>>(y); }
"""

_K2 = ("  __attribute__((global)) void k2(float* y) { y[0] = missing_b; y[1] = missing_c; y[2] = missing_d; "
       "y[3] = missing_e; y[4] = missing_f; }")


def _edg(name: str, col: int) -> str:
    return f'kernel.cu(6): error: identifier "{name}" is undefined\n{_K2}\n{" " * col}^\n\n'


MANY_LOG = (
    'kernel.cu(4): error: identifier "missing_a" is undefined\n'
    "      y[0] = missing_a;\n"
    "             ^\n\n"
    + _edg("missing_b", 53) + _edg("missing_c", 71) + _edg("missing_d", 89) + _edg("missing_e", 107)
    + _edg("missing_f", 125)
    + '6 errors detected in the compilation of "kernel.cu".\n'
)


def test_first_errors_with_lines_source_and_caret():
    out = condense_errors(MANY_LOG, MANY_SRC, max_errors=3)
    lines = out.splitlines()
    assert lines[0] == 'kernel.cu:4: error: identifier "missing_a" is undefined'
    assert lines[1] == "  4 |     y[0] = missing_a;"
    assert lines[2] == "    |            ^"
    assert lines[2].index("^") == lines[1].index("missing_a")
    # nvcc echoes __global__ expanded; the quoted line is the candidate's own, the caret still right
    assert lines[3] == 'kernel.cu:6: error: identifier "missing_b" is undefined'
    assert lines[4].startswith("  6 | __global__ void k2(")
    assert lines[5].index("^") == lines[4].index("missing_b")
    assert lines[6] == 'kernel.cu:6: error: identifier "missing_c" is undefined'
    assert lines[8].index("^") == lines[7].index("missing_c")
    assert '"missing_d"' not in out
    assert lines[-1] == "(3 more errors not shown; fix these first)"
    assert "errors detected" not in out and "__attribute__((global))" not in out


def test_duplicates_are_dropped_and_default_limit_is_five():
    out = condense_errors(MANY_LOG + MANY_LOG, MANY_SRC)
    assert out.count("missing_a") == 2          # message + source line, once
    assert out.splitlines()[-1] == "(1 more error not shown; fix these first)"


def test_full_temporary_paths_are_shortened_to_the_file_name():
    log = MANY_LOG.replace("kernel.cu(", "/tmp/build-x1/kernel.cu(")
    out = condense_errors(log, MANY_SRC, max_errors=1)
    assert out.startswith("kernel.cu:4: error:") and "/tmp" not in out


def test_custom_filename():
    log = MANY_LOG.replace("kernel.cu", "cand_3.cu")
    out = condense_errors(log, MANY_SRC, max_errors=1, filename="cand_3.cu")
    assert out.startswith("cand_3.cu:4: error:") and "  4 |" in out


UNDEF_SRC = """#include <cuda_runtime.h>
void helper(float* y, int n);
extern "C" void solve(float* y, int n) {
    helper(y, n);
}
"""
UNDEF_LOG = """ptxas info    : 0 bytes gmem
/usr/bin/ld: /tmp/tmpxft_0000148d_00000000-11_kernel.o: in function `solve':
tmpxft_0000148d_00000000-6_kernel.cudafe1.cpp:(.text+0x1f9): undefined reference to `helper(float*, int)'
collect2: error: ld returned 1 exit status
"""


def test_linker_error_points_at_the_call():
    out = condense_errors(UNDEF_LOG, UNDEF_SRC)
    first = out.splitlines()[0]
    assert first.startswith("kernel.cu:4: error: undefined reference to `helper(float*, int)` (called in solve)")
    assert "define it" in first
    assert "  4 |     helper(y, n);" in out
    assert "collect2" not in out and "tmpxft" not in out


PTXAS_LOG = """ptxas error   : Entry function '_Z3bigPf' uses too much shared data (0x13880 bytes, 0xc000 max)
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z3bigPf' for 'sm_90'
ptxas info    : Function properties for _Z3bigPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers, 80000 bytes smem
"""


def test_ptxas_error_is_kept_with_a_readable_name():
    out = condense_errors(PTXAS_LOG, "")
    assert out.splitlines() == ["ptxas: error: Entry function 'big(float*)' uses too much shared data (0x13880 bytes, 0xc000 max)"]


def test_host_compiler_error_with_column():
    log = (
        "kernel.cu:2:10: fatal error: cublas_v2.h: No such file or directory\n"
        "    2 | #include <cublas_v2.h>\n"
        "      |          ^~~~~~~~~~~~~\n"
        "compilation terminated.\n"
    )
    src = "#include <cuda_runtime.h>\n#include <cublas_v2.h>\n"
    out = condense_errors(log, src).splitlines()
    assert out[0] == "kernel.cu:2: error: cublas_v2.h: No such file or directory"
    assert out[1] == "  2 | #include <cublas_v2.h>"
    assert out[2].index("^") == out[1].index("<")


def test_tool_fatal_and_unrecognised_logs():
    assert condense_errors("nvcc fatal   : Unknown option '-bogus'\n", "") == "nvcc: error: Unknown option '-bogus'"
    crash = "Segmentation fault (core dumped) in cicc\nsomething odd\n"
    assert condense_errors(crash, "") == crash.strip()
    assert condense_errors("", "") == ""


def test_errors_in_headers_name_the_header():
    log = '/usr/local/cuda/include/x.h(10): error: expected a ";"\n'
    assert condense_errors(log, "int a;\n") == '/usr/local/cuda/include/x.h:10: error: expected a ";"'


def test_extract_warnings():
    log = (
        'kernel.cu(2): warning #177-D: variable "unused" was declared but never referenced\n'
        "  __attribute__((global)) void k(float* y) { int unused = 3; y[0] = 1; }\n"
        "                                                 ^\n\n"
        'Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"\n\n'
        'kernel.cu(2): warning #177-D: variable "unused" was declared but never referenced\n'
        "ptxas warning : Registers are spilled to local memory in function 'k'\n"
    )
    assert extract_warnings(log) == [
        'kernel.cu:2: variable "unused" was declared but never referenced',
        "ptxas: Registers are spilled to local memory in function 'k'",
    ]
    assert extract_warnings(MANY_LOG) == []


# Recorded from nvcc 13.0 building an sm_90a-only instruction for sm_90 with -keep -lineinfo: ptxas names
# the kept PTX file and its line, then aborts; the PTX's .loc directives map that line to the source.
INLINE_PTX_LOG = (
    "ptxas nvcc-keep/r3c1.ptx, line 28; error   : Instruction 'wgmma.fence' not supported on .target 'sm_90'\n"
    "ptxas fatal   : Ptx assembly aborted due to errors\n"
)
INLINE_PTX = "\n".join([".version 9.0", ".target sm_90"] + [""] * 18 + [
    "\t.loc\t1 2 0", "", "", "", "\t.loc\t1 3 3", "", "", "\twgmma.fence.sync.aligned;", "", "",
    "\t.loc\t1 4 3", "\tst.global.f32 [%rd1], %f1;", "\t.file\t1 \"/tmp/build/r3c1.cu\""])
INLINE_SRC = ('#include <cuda_runtime.h>\n__global__ void k(float* y) {\n'
              '  asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");\n  y[threadIdx.x] = 1.f;\n}\n')


def test_inline_ptx_errors_keep_the_instruction_and_point_at_the_line():
    out = condense_errors(INLINE_PTX_LOG, INLINE_SRC, filename="r3c1.cu", ptx=INLINE_PTX).splitlines()
    assert out[0].startswith("r3c1.cu:3: error: Instruction 'wgmma.fence' not supported on .target 'sm_90'")
    assert "sm_90a" in out[0]                                    # what to do about it
    assert out[1] == '  3 |   asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");'
    assert not any("aborted" in line for line in out)


def test_inline_ptx_errors_without_the_ptx_keep_the_message():
    out = condense_errors(INLINE_PTX_LOG, INLINE_SRC, filename="r3c1.cu")
    assert out.startswith("ptxas: error: Instruction 'wgmma.fence' not supported on .target 'sm_90' (PTX line 28)")
    assert "aborted" not in out
    # only the abort line: it stays (better than nothing)
    assert "aborted due to errors" in condense_errors("ptxas fatal   : Ptx assembly aborted due to errors\n", "")


def test_an_undefined_driver_call_says_how_to_get_it():
    log = "/usr/bin/ld: /tmp/x.o: in function `solve':\nr3c1.cu:(.text+0x1f): undefined reference to `cuTensorMapEncodeTiled'\n"
    src = "#include <cuda.h>\nvoid f() {}\nextern \"C\" void solve() { CUtensorMap m; cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, 0, 0, 0, 0, 0, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE); }\n"
    out = condense_errors(log, src, filename="r3c1.cu")
    assert out.startswith("r3c1.cu:3: error: undefined reference to `cuTensorMapEncodeTiled`")
    assert 'cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled"' in out
