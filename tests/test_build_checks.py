"""What the judge reads after compiling, with the real nvcc: the preprocessed host source (macros and
token pasting expanded), the linked object's undefined dynamic symbols, and the kernels a library
instantiated. Each trick below hides from the raw-text rules and is refused as `static_error` naming the
symbol or construct; every correct kernel (the block-level CUB + cooperative-groups kernel, the feature
exemplars, the Hopper test kernels) passes. The naive baselines and the CUB yardsticks are checked where
they are built (test_suite_builds.py), the adversarial kernels in test_adversarial_static.py."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from cuda_llm.feature_db.catalogue import load_catalogue
from cuda_llm.results import Status
from cuda_llm.tasks import load_task
from cuda_llm.tools.compiler.compile import compile_many
from cuda_llm.tools.compiler.static_check import check_source
from cuda_llm.tools.compiler.symbols import check_build, check_kernels, check_symbols, classify_symbol

HOPPER = Path(__file__).parent / "hopper"

GELU_KERNEL = """#include <cuda_runtime.h>
__global__ void k(const float* x, float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }
"""


def _gelu(body: str, head: str = "") -> str:
    """A correct gelu-signature candidate whose solve() also runs ``body`` (line 4 of the file + head lines)."""
    return (head + GELU_KERNEL + 'extern "C" void solve(const float* x, float* y, int n) {\n'
            + body + "\n    k<<<(n + 255) / 256, 256>>>(x, y, n);\n}\n")


PASTE = "#define CAT(a, b) a##b\n"

# name -> (task, source, rules the build check must report, a word its message must name, source line or None)
REFUSALS: dict[str, tuple[str, str, set[str], str, int | None]] = {
    "pasted_system": ("gelu", _gelu('    CAT(sys, tem)("nvidia-smi");', "#include <cstdlib>\n" + PASTE),
                      {"host-trick", "forbidden-symbol"}, "system", 6),
    "pasted_dlopen": ("gelu", _gelu('    void* h = CAT(dl, open)("libcublas.so", RTLD_NOW); (void)h;', "#include <dlfcn.h>\n" + PASTE),
                      {"host-trick", "forbidden-symbol"}, "dlopen", 6),
    "syscall_function": ("gelu", _gelu("    long pid = CAT(sys, call)(39); (void)pid;", "#include <unistd.h>\n" + PASTE),
                         {"host-trick", "forbidden-symbol"}, "syscall", 6),
    "syscall_inline_asm": ("gelu", _gelu('    if (n < 0) asm volatile(INSN ::: "rax", "rcx", "r11", "memory");',
                                         '#define INSN "mov $39, %%eax\\n\\t" "sys" "call"\n'),
                           {"host-asm"}, "syscall", 5),
    "using_namespace_cub_sort": ("sort_u32", """#include <cuda_runtime.h>
#include <cub/cub.cuh>
using namespace cub;
extern "C" void solve(const unsigned int* keys_in, unsigned int* keys_out, int n) {
    size_t bytes = 0;
    DeviceRadixSort::SortKeys(nullptr, bytes, keys_in, keys_out, n);
    void* tmp = nullptr;
    cudaMalloc(&tmp, bytes);
    DeviceRadixSort::SortKeys(tmp, bytes, keys_in, keys_out, n);
    cudaFree(tmp);
}
""", {"forbidden-library"}, "DeviceRadixSort", None),
    "python_api_through_dlsym": ("gelu", _gelu(
        "    void* self = CAT(dl, open)(nullptr, RTLD_NOW);\n"
        '    auto run = (int (*)(const char*))CAT(dl, sym)(self, "PyRun_" "SimpleString");\n'
        '    if (run) run("import sys");', "#include <dlfcn.h>\n" + PASTE),
        {"host-trick", "forbidden-symbol"}, "dlsym", 6),
    # a weak declaration links without libpython and binds to the worker's own interpreter at load time
    "python_api_weak_symbol": ("gelu", _gelu('    if (&CAT(Py, Run_SimpleString)) CAT(Py, Run_SimpleString)("import os");',
                                             PASTE + 'extern "C" __attribute__((weak)) int CAT(Py, Run_SimpleString)(const char*);\n'),
                               {"host-trick", "forbidden-symbol"}, "PyRun_SimpleString", 2),
    "pasted_exit": ("gelu", _gelu("    if (n < 0) CAT(ex, it)(0);", "#include <cstdlib>\n" + PASTE),
                    {"host-trick"}, "exit", 6),
    "pasted_socket": ("gelu", _gelu("    int s = CAT(sock, et)(AF_INET, SOCK_STREAM, 0); (void)s;",
                                    "#include <sys/socket.h>\n#include <netinet/in.h>\n" + PASTE),
                      {"host-trick", "forbidden-symbol"}, "socket", 7),
    "fopen_behind_a_macro": ("gelu", _gelu('    FILE* f = OPEN_IT("/tmp/cached_output.bin", "rb"); if (f) fclose(f);',
                                           "#include <cstdio>\n#define OPEN_IT fopen\n"),
                             {"host-trick", "forbidden-symbol"}, "fopen", 6),
    "persisting_l2_limit": ("gelu", _gelu("    cudaDeviceSetLimit(L2_LIMIT, 32 << 20);", "#define L2_LIMIT (cudaLimit)0x06\n"),
                            {"l2-persistence"}, "cudaDeviceSetLimit", 5),
    "asm_label_rename": ("gelu", _gelu('    if (n < 0) launch_tool("ls");', 'extern "C" int launch_tool(const char*) __asm__("sys" "tem");\n'),
                         {"forbidden-symbol"}, "system", None),
}


@pytest.fixture(scope="module")
def builds(nvcc_path, tmp_path_factory):
    """Every source of this module, compiled in one parallel batch into one cache (also used by the
    evaluate_candidate calls below through $CUDA_LLM_CACHE)."""
    root = tmp_path_factory.mktemp("build_checks")
    old = os.environ.get("CUDA_LLM_CACHE")
    os.environ["CUDA_LLM_CACHE"] = str(root)
    allowed = _allowed_sources()
    names = list(REFUSALS) + list(allowed)
    sources = [REFUSALS[n][1] for n in REFUSALS] + [allowed[n][1] for n in allowed]
    results = compile_many(sources, arch="sm_90", cache_root=root, filenames=names)
    yield dict(zip(names, results)), allowed
    if old is None:
        os.environ.pop("CUDA_LLM_CACHE", None)
    else:
        os.environ["CUDA_LLM_CACHE"] = old


BLOCK_CUB_AND_COOPERATIVE_GROUPS = """// reduce_sum with block-level CUB and cooperative groups (allowed: they run inside this kernel)
#include <cuda_runtime.h>
#include <cub/cub.cuh>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

__global__ void reduce_kernel(const float* x, float* out, int n) {
    using BlockReduce = cub::BlockReduce<float, 256>;
    __shared__ typename BlockReduce::TempStorage tmp;
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += x[i];
    float w = cg::reduce(warp, v, cg::plus<float>());
    float s = BlockReduce(tmp).Sum(warp.thread_rank() == 0 ? w : 0.0f);
    if (threadIdx.x == 0) atomicAdd(out, s);
}

extern "C" void solve(const float* x, float* out, int n) {
    cudaMemsetAsync(out, 0, sizeof(float));
    if (n > 0) reduce_kernel<<<264, 256>>>(x, out, n);
}
"""


def _allowed_sources() -> dict[str, tuple[str | None, str]]:
    """name -> (task or None, source) of correct code that must pass every check."""
    out: dict[str, tuple[str | None, str]] = {
        "block_cub_cooperative_groups": ("reduce_sum", BLOCK_CUB_AND_COOPERATIVE_GROUPS),
        "hgemm_wgmma": ("hgemm", (HOPPER / "hgemm_wgmma.cu").read_text()),
        "transpose_tma": ("transpose", (HOPPER / "transpose_tma.cu").read_text()),
    }
    out["feature_exemplars"] = (None, exemplars_as_one_file())
    return out


def exemplars_as_one_file() -> str:
    """Every feature exemplar the sm_90a build can run, in one translation unit (one compile instead of
    25): each in its own namespace, their #include lines hoisted and deduplicated."""
    includes: list[str] = []
    parts: list[str] = []
    for f in load_catalogue():
        if f.min_cc > (9, 0):
            continue
        body = []
        for line in f.exemplar.splitlines():
            if re.match(r"\s*#\s*include", line):
                if line.strip() not in includes:
                    includes.append(line.strip())
            else:
                body.append(line)
        undefs = "".join(f"#undef {m}\n" for m in re.findall(r"^\s*#\s*define\s+(\w+)", f.exemplar, re.M))
        parts.append(f"// ---- {f.id}\nnamespace ex_{f.id} {{\n" + "\n".join(body) + f"\n}}  // namespace ex_{f.id}\n"
                     + undefs)
    return "\n".join(includes) + "\n" + "\n".join(parts)


# ------------------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize("name", list(REFUSALS))
def test_each_trick_is_refused_after_compiling(builds, name):
    results, _ = builds
    task, _src, rules, word, line = REFUSALS[name]
    comp = results[name]
    assert comp.ok, f"{name} must compile (the refusal is the judge's, not the compiler's): {comp.errors}"
    issues = check_build(comp)
    assert issues, f"{name}: nothing refused; undefined symbols {comp.undefined_symbols}"
    assert rules <= {i.rule for i in issues}, (name, issues)
    assert any(word in i.message for i in issues), (name, issues)
    for i in issues:
        assert ":" in i.message and len(i.message) > 40, i       # what it is and what to do instead
    if line is not None:
        assert line in {i.line for i in issues if i.line is not None}, (name, issues)


@pytest.mark.parametrize("name", ["pasted_system", "using_namespace_cub_sort", "python_api_weak_symbol", "fopen_behind_a_macro"])
def test_hidden_tricks_pass_the_raw_text_and_are_static_errors_in_evaluation(builds, name, tmp_path):
    """The raw source hides these (that is the point); evaluation still refuses them as static_error,
    without a GPU, naming the symbol or construct."""
    from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate

    task, src, _rules, word, _line = REFUSALS[name]
    loaded = load_task(task)
    assert check_source(src, loaded.task) == [], "the raw-text rules are expected to miss this one"
    res = evaluate_candidate(loaded, src, candidate=name, options=EvalOptions(arch="sm_90"), work_dir=tmp_path)
    assert res.status is Status.static_error, (res.status, res.message)
    assert res.message.startswith("refused after compiling") and word in res.message
    assert res.compile is not None and res.compile.ok and res.validation is None and res.timing is None


def test_library_mode_accepts_device_wide_cub(builds):
    results, _ = builds
    comp = results["using_namespace_cub_sort"]
    assert check_build(comp, allow_libraries=True) == []


# ------------------------------------------------------------------------------------------ no false refusal
def test_correct_kernels_pass_every_check(builds):
    results, allowed = builds
    assert exemplars_as_one_file().count("// ---- ") >= 20
    failed = {}
    for name, (task, src) in allowed.items():
        comp = results[name]
        problems = [] if comp.ok else [comp.errors[-800:]]
        problems += [i.message for i in check_build(comp)] if comp.ok else []
        if task is not None:
            problems += [i.message for i in check_source(src, load_task(task).task)]
        if problems:
            failed[name] = problems
    assert not failed, failed


def test_hopper_kernels_use_the_hopper_units(builds):
    results, _ = builds
    hg, tr = results["hgemm_wgmma"], results["transpose_tma"]
    assert hg.arch == "sm_90a" and tr.arch == "sm_90a"
    assert "cudaGetDriverEntryPointByVersion" in hg.undefined_symbols
    if hg.sass is None:
        pytest.skip("cuobjdump not found (pip install -e '.[dev]' installs it)")
    assert hg.sass.opcodes.get("HGMMA") and hg.sass.tensor == {"fp16": hg.sass.opcodes["HGMMA"]}
    assert tr.sass.opcodes.get("UTMALDG"), sorted(tr.sass.opcodes)      # the TMA load instruction
    assert not tr.sass.uses_tensor_cores


# ------------------------------------------------------------------------------------------ pure rules
CUBLAS_YARDSTICK_SYMBOLS = ["__cudaRegisterFunction", "cublasCreate_v2", "cublasSetStream_v2", "cublasSetMathMode",
                            "cublasGemmEx", "cudaMemset", "__cxa_guard_acquire", "_ZdlPvm", "_Unwind_Resume"]


def test_vendor_libraries_only_in_library_mode():
    issues = check_symbols(CUBLAS_YARDSTICK_SYMBOLS)
    assert {i.rule for i in issues} == {"forbidden-library"} and len(issues) == 4
    assert "cublasGemmEx" in " ".join(i.message for i in issues)
    assert check_symbols(CUBLAS_YARDSTICK_SYMBOLS, allow_libraries=True) == []


def test_symbol_allowlist():
    for ok in ("cudaLaunchKernel", "__cudaRegisterFatBinary", "cudaGetDriverEntryPointByVersion", "memcpy", "sinf",
               "__expf_finite", "printf", "__printf_chk", "_Znwm", "_ZdaPv", "__cxa_throw", "_ZSt20__throw_length_errorPKc",
               "_ZNSt8ios_base4InitC1Ev", "_ZNSolsEi", "exit", "__assert_fail", "cuTensorMapEncodeTiled", "pthread_once"):
        assert classify_symbol(ok) is None, ok
    for bad, what in (("dlopen", "dynamic loading"), ("dlsym", "dynamic loading"), ("system", "process creation"),
                      ("execvp", "process creation"), ("fork", "process creation"), ("syscall", "raw system calls"),
                      ("abort", "ending the process"), ("_exit", "ending the process"), ("fopen64", "file access"),
                      ("open", "file access"), ("mmap", "file access"), ("socket", "network access"),
                      ("getenv", "environment variables"), ("PyRun_SimpleString", "the Python C API"),
                      ("_Py_NoneStruct", "the Python C API"), ("pthread_create", "host threads"),
                      ("usleep", "sleeping or waiting"), ("sigaction", "signals"), ("cudaDeviceReset", "a CUDA runtime call"),
                      ("cudaIpcOpenMemHandle", "a CUDA runtime call"), ("cuCtxSetLimit", "outside the candidate contract"),
                      ("_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE", "host threads"),
                      ("_ZNSt13basic_filebufIcSt11char_traitsIcEE4openEPKcSt13_Ios_Openmode", "outside the contract")):
        got = classify_symbol(bad)
        assert got is not None and what in got[0], (bad, got)


def test_library_kernels_by_name():
    names = [
        "void cub::CUB_300001_SM_900::detail::radix_sort::DeviceRadixSortOnesweepKernel<cub::X, (bool)0>(int*)",
        "void cub::CUB_300001_SM_900::detail::EmptyKernel<void>()",
        "reduce_kernel(float const*, float*, int)",
        "_ZN6thrust23THRUST_300001_SM_900_NS8cuda_cub4core6detail13_kernel_agentIXEEvT_",
    ]
    issues = check_kernels(names)
    assert len(issues) == 2
    assert issues[0].message.startswith("cub::detail::radix_sort::DeviceRadixSortOnesweepKernel (device-wide CUB)")
    assert "thrust" in issues[1].message


def test_symbols_read_the_same_with_nm(builds):
    """pyelftools is the reader; binutils' nm -D is the fallback where it is missing."""
    import shutil

    from cuda_llm.tools.compiler import symbols

    if shutil.which("nm") is None:
        pytest.skip("binutils' nm not installed")
    results, _ = builds
    comp = results["pasted_system"]
    assert symbols._undefined_with_nm(comp.so_path) == symbols.undefined_symbols(comp.so_path)
    assert "system" in comp.undefined_symbols


def test_a_file_that_is_not_elf_is_refused(tmp_path):
    from cuda_llm.tools.compiler import symbols

    junk = tmp_path / "x.so"
    junk.write_bytes(b"not an elf")
    with pytest.raises(ValueError, match="not an ELF"):
        symbols.undefined_symbols(junk)
    assert classify_symbol("<unreadable shared object>") is not None
