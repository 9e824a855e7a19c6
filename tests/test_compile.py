"""The compilation verifier with the real nvcc (sm_90, no GPU needed) and, for timing-sensitive paths
(timeout, parallelism, cache keys), with a fake nvcc script that sleeps and writes an empty .so."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import time
from pathlib import Path

import pytest

from cuda_llm.tools.compiler import compile as comp
from cuda_llm.tools.compiler.compile import (
    CompileSetupError,
    build_command,
    compile_many,
    compile_source,
    normalize_arch,
    nvcc_path,
    nvcc_version,
    resolve_arch,
    source_hash,
)
from cuda_llm.tools.compiler.ptxas import parse_ptxas

GOOD = """#include <cuda_runtime.h>
__global__ void scale_kernel(const float* x, float* y, int n) {
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = 2.0f * tile[threadIdx.x];
}
extern "C" void solve(const float* x, float* y, int n) {
    scale_kernel<<<(n + 255) / 256, 256>>>(x, y, n);
}
"""

# A large indexed local array under a tight register budget: ptxas must spill.
SPILLS = """#include <cuda_runtime.h>
template <int N>
__global__ void __launch_bounds__(1024, 2) spill_kernel(float* y, const float* x, int n) {
    float a[N];
    for (int i = 0; i < N; ++i) a[i] = x[(threadIdx.x + i * 7) % n];
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < N; ++j) s += a[(j * 13) % N] * a[j];
    y[threadIdx.x] = s;
}
extern "C" void solve(const float* x, float* y, int n) { spill_kernel<128><<<1, 32>>>(y, x, n); }
"""

SYNTAX = """#include <cuda_runtime.h>
__global__ void k(float* y, int n) {
    int i = threadIdx.x;
    if (i < n) y[i] = undefined_name * 2.0f;
}
extern "C" void solve(float* y, int n) { k<<<1, 32>>>(y, n); }
"""

UNDEFINED = """#include <cuda_runtime.h>
void helper(float* y, int n);
extern "C" void solve(float* y, int n) {
    helper(y, n);
}
"""


@pytest.fixture(scope="module")
def real_builds(tmp_path_factory, nvcc_path):
    """One parallel batch of real compiles shared by the tests below (keeps the suite fast)."""
    root = tmp_path_factory.mktemp("cache")
    start = time.monotonic()
    results = compile_many([GOOD, SPILLS, SYNTAX, UNDEFINED], arch="sm_90", cache_root=root)
    return root, results, time.monotonic() - start


def test_good_kernel_compiles_and_reports_resources(real_builds):
    _, (good, *_), _ = real_builds
    assert good.ok, good.errors
    assert good.arch == "sm_90a" and not good.cached and not good.timed_out
    assert good.so_path and Path(good.so_path).is_file() and Path(good.so_path).stat().st_size > 0
    assert "-gencode=arch=compute_90a,code=sm_90a" in good.command and "-lineinfo" in good.command and "-shared" in good.command
    assert good.errors == ""
    (kernel,) = good.kernels
    assert kernel.name.startswith("scale_kernel(")
    assert 0 < kernel.registers <= 255
    assert kernel.shared_bytes == 256 * 4
    assert not kernel.spills
    build = Path(good.so_path).parent
    assert {"kernel.cu", "kernel.so", "compile.log", "result.json"} <= {p.name for p in build.iterdir()}
    assert (build / "kernel.cu").read_text() == GOOD
    assert not (build / comp.KEEP_DIR).exists(), "the intermediate files are deleted after the checks read them"
    # facts for the checks, recorded with the build
    assert "__cudaRegisterFunction" in good.undefined_symbols and "cudaLaunchKernel" not in good.source_issues
    assert good.source_issues == []
    if good.sass is not None:              # cuobjdump found (the dev extra installs it)
        assert good.sass.opcodes.get("LDG") and not good.sass.uses_tensor_cores


def test_a_ptx_the_dataflow_analysis_cannot_read_never_fails_the_build(nvcc_path, tmp_path, monkeypatch):
    """The facts are for the detectors: an analysis that raises leaves them empty, the build still passes."""
    def broken(ptx: str) -> dict:
        raise RecursionError("deep def chain")
    monkeypatch.setattr(comp, "flow_facts", broken)
    (res,) = compile_many([GOOD.replace("scale_kernel", "scale_kernel_flow")], arch="sm_90", cache_root=tmp_path)
    assert res.ok, res.errors
    if res.sass is not None:
        assert res.sass.flow == {} and res.sass.opcodes.get("LDG")


def test_candidate_shares_the_toolkits_runtime(real_builds):
    """The worker reads launch errors from the runtime the .so uses: it must be the shared one, found by
    the .so's own run path (not only by the loader's search path)."""
    _, (good, *_), _ = real_builds
    dynamic = subprocess.run(["readelf", "-d", good.so_path], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\).*\[(.+)\]", dynamic)
    assert any(n.startswith("libcudart.so") for n in needed), needed
    paths = re.findall(r"\((?:RUNPATH|RPATH)\).*\[(.+)\]", dynamic)
    assert paths and any(Path(p, n).exists() for p in paths[0].split(":") for n in needed if "cudart" in n)


def test_spilling_kernel_reports_spills(real_builds):
    _, (_, spill, *_), _ = real_builds
    assert spill.ok, spill.errors
    (kernel,) = spill.kernels
    assert "spill_kernel<128>" in kernel.name
    assert kernel.spills and kernel.spill_store_bytes > 0 and kernel.spill_load_bytes > 0
    assert kernel.registers <= 32       # 65536 / (1024 * 2)
    assert kernel.stack_bytes > 0


def test_syntax_error_is_condensed_with_the_right_line(real_builds):
    _, (_, _, bad, *_), _ = real_builds
    assert not bad.ok and bad.so_path is None and not bad.timed_out
    first = bad.errors.splitlines()[0]
    assert first.startswith("kernel.cu:4: error:") and "undefined_name" in first
    assert "y[i] = undefined_name * 2.0f;" in bad.errors
    assert "^" in bad.errors
    assert "/tmp" not in bad.errors


def test_undefined_function_fails_at_compile_time(real_builds):
    undef = real_builds[1][3]
    assert not undef.ok
    assert "undefined reference" in undef.errors and "helper" in undef.errors
    assert undef.errors.startswith("kernel.cu:4:")      # the call, not the declaration


def test_second_compile_is_a_cache_hit(real_builds):
    root, (good, _, bad, *_), _ = real_builds
    again = compile_source(GOOD, arch="sm_90", cache_root=root)
    assert again.cached and again.ok and again.seconds < 0.5
    assert again.so_path == good.so_path and again.kernels == good.kernels
    bad_again = compile_source(SYNTAX, arch="sm_90", cache_root=root)
    assert bad_again.cached and not bad_again.ok and bad_again.errors == bad.errors


def test_compile_many_ran_in_parallel(real_builds):
    root, results, wall = real_builds
    for src, r in zip([GOOD, SPILLS, SYNTAX, UNDEFINED], results):   # results come back in input order
        assert (root / "builds" / r.source_hash / "kernel.cu").read_text() == src
    if (os.cpu_count() or 1) >= 2:
        assert wall < sum(r.seconds for r in results)


# ------------------------------------------------------------------------------------- fake nvcc
FAKE_NVCC = """#!/bin/bash
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 99.0, V99.0.1"; exit 0; fi
if [ "$1" = "-dryrun" ]; then echo '#$ LIBRARIES=  "-L/nonexistent/lib"'; exit 0; fi
out=""; prev=""
for a in "$@"; do if [ "$prev" = "-o" ]; then out="$a"; fi; prev="$a"; done
echo "start $(date +%s.%N)" >> "$FAKE_NVCC_LOG"
sleep "${FAKE_NVCC_SLEEP:-0}" &
echo "child $!" >> "$FAKE_NVCC_LOG"
wait
echo "end $(date +%s.%N)" >> "$FAKE_NVCC_LOG"
echo "ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'"
echo "ptxas info    : Used 8 registers, used 0 barriers"
: > "$out"
"""


@pytest.fixture
def fake_nvcc(tmp_path, monkeypatch):
    script = tmp_path / "bin" / "nvcc"
    script.parent.mkdir()
    script.write_text(FAKE_NVCC)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "nvcc.log"
    monkeypatch.setenv("CUDA_LLM_NVCC", str(script))
    monkeypatch.setenv("FAKE_NVCC_LOG", str(log))
    return script, log


def _intervals(log: Path) -> list[tuple[float, float]]:
    lines = log.read_text().splitlines()
    starts = [float(line.split()[1]) for line in lines if line.startswith("start")]
    ends = [float(line.split()[1]) for line in lines if line.startswith("end")]
    return list(zip(sorted(starts), sorted(ends)))


def test_timeout_kills_the_whole_process_group(fake_nvcc, tmp_path, monkeypatch):
    _, log = fake_nvcc
    monkeypatch.setenv("FAKE_NVCC_SLEEP", "30")
    start = time.monotonic()
    r = compile_source(GOOD, arch="sm_90", timeout_s=1.0, cache_root=tmp_path)
    assert time.monotonic() - start < 8
    assert r.timed_out and not r.ok and r.so_path is None
    assert "did not finish within 1 s" in r.errors
    child = int(next(line for line in log.read_text().splitlines() if line.startswith("child")).split()[1])
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child), "nvcc's child process survived the timeout"
    # a timed-out build is not cached: the next call compiles again
    monkeypatch.setenv("FAKE_NVCC_SLEEP", "0")
    again = compile_source(GOOD, arch="sm_90", timeout_s=30, cache_root=tmp_path)
    assert again.ok and not again.cached


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_compile_many_overlaps_compiles(fake_nvcc, tmp_path, monkeypatch):
    _, log = fake_nvcc
    monkeypatch.setenv("FAKE_NVCC_SLEEP", "1")
    sources = [GOOD + f"// variant {i}\n" for i in range(4)]
    start = time.monotonic()
    results = compile_many(sources, jobs=4, arch="sm_90", cache_root=tmp_path)
    wall = time.monotonic() - start
    assert all(r.ok for r in results)
    assert [Path(r.so_path).parent.joinpath("kernel.cu").read_text() for r in results] == sources
    assert wall < 3.0, f"4 one-second compiles with 4 jobs took {wall:.1f} s"
    spans = _intervals(log)
    assert len(spans) == 4 and max(s for s, _ in spans) < min(e for _, e in spans)


def test_same_source_compiled_concurrently_is_safe(fake_nvcc, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NVCC_SLEEP", "0.3")
    results = compile_many([GOOD] * 6, jobs=6, arch="sm_90", cache_root=tmp_path)
    assert all(r.ok for r in results)
    assert len({r.so_path for r in results}) == 1 and Path(results[0].so_path).is_file()
    builds = [p for p in (tmp_path / "builds").iterdir()]
    assert [p.name for p in builds] == [results[0].source_hash]   # no temporary folders left behind


def test_cache_key_covers_flags_arch_and_compiler(fake_nvcc, tmp_path, monkeypatch):
    base = compile_source(GOOD, arch="sm_90", cache_root=tmp_path)
    assert compile_source(GOOD, arch="sm_90", cache_root=tmp_path).cached
    for kw in ({"arch": "sm_80"}, {"arch": "sm_90", "extra_flags": ["-maxrregcount=32"]},
               {"arch": "sm_90", "libs": ["cublas"]}):
        other = compile_source(GOOD, cache_root=tmp_path, **kw)
        assert not other.cached and other.source_hash != base.source_hash
    # another compiler version gives another key
    script, _ = fake_nvcc
    script.write_text(FAKE_NVCC.replace("V99.0.1", "V99.0.2"))
    comp._version_text.cache_clear()
    assert not compile_source(GOOD, arch="sm_90", cache_root=tmp_path).cached
    comp._version_text.cache_clear()
    # cache=False compiles again
    assert not compile_source(GOOD, arch="sm_90", cache_root=tmp_path, cache=False).cached


def test_build_command_has_the_contract_flags(fake_nvcc):
    cmd = build_command(Path("k.cu"), Path("k.so"), "sm_90", ["-maxrregcount=64"], ["cublas"])
    assert cmd[0] == os.environ["CUDA_LLM_NVCC"]
    for flag in ("-gencode=arch=compute_90a,code=sm_90a", "-O3", "-DCCCL_DISABLE_NVTX", "-keep", "-shared", "-fPIC", "-lineinfo", "-v", "--no-undefined", "-maxrregcount=64"):
        assert flag in cmd
    assert cmd[cmd.index("-Xptxas") + 1] == "-v"
    assert cmd[cmd.index("-cudart") + 1] == "shared"
    assert cmd[-1] == "-lcublas" and cmd[cmd.index("-o") + 1] == "k.so"


# ------------------------------------------------------------------------------------- set-up
def test_nvcc_env_pointing_nowhere_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_LLM_NVCC", str(tmp_path / "no-nvcc"))
    with pytest.raises(CompileSetupError, match="CUDA_LLM_NVCC"):
        nvcc_path()


def test_missing_nvcc_says_what_to_install(monkeypatch):
    monkeypatch.delenv("CUDA_LLM_NVCC", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(comp, "_NVCC_PLACES", ("/nonexistent/nvcc",))
    with pytest.raises(CompileSetupError, match="Install the CUDA toolkit"):
        nvcc_path()


def test_nvcc_version_of_the_real_compiler(nvcc_path):
    v = nvcc_version(nvcc_path)
    assert v.count(".") == 2 and v.split(".")[0].isdigit()


def test_resolve_arch_order(monkeypatch):
    monkeypatch.setattr(comp, "device_arch", lambda: None)
    monkeypatch.delenv("CUDA_LLM_ARCH", raising=False)
    assert resolve_arch() == "sm_90"
    monkeypatch.setattr(comp, "device_arch", lambda: "sm_89")
    assert resolve_arch() == "sm_89"
    monkeypatch.setenv("CUDA_LLM_ARCH", "8.0")
    assert resolve_arch() == "sm_80"
    assert resolve_arch("sm_90a") == "sm_90a"
    assert normalize_arch("90") == "sm_90" and normalize_arch("sm100a") == "sm_100a"
    with pytest.raises(CompileSetupError, match="sm_XY"):
        resolve_arch("hopper")
    monkeypatch.setenv("CUDA_LLM_ARCH", "bogus")
    with pytest.raises(CompileSetupError, match="CUDA_LLM_ARCH"):
        resolve_arch()


def test_source_hash_is_short_and_sensitive():
    h = source_hash("a", "x")
    assert len(h) == 16 and int(h, 16) >= 0
    assert h != source_hash("a", "y") and h != source_hash("ax") and h == source_hash("a", "x")


# ------------------------------------------------------------------------------------- ptxas
OLD_FORMAT = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z6reducePKfPfi' for 'sm_80'
ptxas info    : Function properties for _Z6reducePKfPfi
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, 4096 bytes smem, 380 bytes cmem[0], 8 bytes cmem[2]
ptxas info    : Function properties for _Z6helperf
    64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'plain_c_kernel' for 'sm_80'
ptxas info    : Function properties for plain_c_kernel
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 6 registers, 356 bytes cmem[0]
"""


def test_parse_ptxas_older_layout_with_cmem():
    reduce_k, plain = parse_ptxas(OLD_FORMAT)
    assert reduce_k.name == "reduce(float const*, float*, int)"
    assert (reduce_k.registers, reduce_k.shared_bytes, reduce_k.constant_bytes) == (40, 4096, 380)
    assert (reduce_k.stack_bytes, reduce_k.spill_store_bytes, reduce_k.spill_load_bytes) == (8, 4, 12)
    assert plain.name == "plain_c_kernel" and plain.registers == 6 and plain.stack_bytes == 0


def test_parse_ptxas_keeps_mangled_names_without_demangler(monkeypatch):
    from cuda_llm.tools.compiler import ptxas

    monkeypatch.setattr(ptxas, "_demangler", lambda: None)
    assert parse_ptxas(OLD_FORMAT)[0].name == "_Z6reducePKfPfi"
    assert parse_ptxas("") == []


def test_broken_cache_entry_is_rebuilt(fake_nvcc, tmp_path):
    first = compile_source(GOOD, arch="sm_90", cache_root=tmp_path)
    entry = Path(first.so_path).parent
    (entry / "result.json").write_text("{not json")
    again = compile_source(GOOD, arch="sm_90", cache_root=tmp_path)
    assert again.ok and not again.cached
    assert compile_source(GOOD, arch="sm_90", cache_root=tmp_path).cached


def test_huge_logs_are_clipped_in_the_result_but_kept_on_disk(fake_nvcc, tmp_path):
    script, _ = fake_nvcc
    script.write_text(FAKE_NVCC.replace(': > "$out"', 'for i in $(seq 3000); do echo "kernel.cu(1): error: x$i ' + "y" * 60 + '"; done; exit 2'))
    r = compile_source(GOOD, arch="sm_90", cache_root=tmp_path)
    assert not r.ok and len(r.log) < 110_000 and "characters cut" in r.log
    full = (tmp_path / "builds" / r.source_hash / "compile.log").read_text()
    assert len(full) > 200_000 and "x3000" in full and "x3000" in r.log
    assert r.errors.splitlines()[-1] == "(2995 more errors not shown; fix these first)"


def test_leftovers_of_killed_compiles_are_removed(tmp_path):
    builds = tmp_path / "builds"
    old, fresh, kept = builds / ".abc-old", builds / ".abc-new", builds / "0123456789abcdef"
    for p in (old, fresh, kept):
        p.mkdir(parents=True)
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert comp.remove_stale_builds(builds) == 1
    assert not old.exists() and fresh.exists() and kept.exists()


# ------------------------------------------------------------------------------------- targets and names
def test_build_target_is_architecture_specific_where_one_exists():
    assert comp.build_target("sm_90") == "sm_90a"
    assert comp.build_target("sm_100") == "sm_100a" and comp.build_target("sm_120") == "sm_120a"
    assert comp.build_target("sm_80") == "sm_80" and comp.build_target("sm_89") == "sm_89"
    assert comp.build_target("sm_90a") == "sm_90a" and comp.build_target("sm_100f") == "sm_100f"
    assert comp.gencode("sm_90a") == "-gencode=arch=compute_90a,code=sm_90a"


def test_candidate_file_names():
    assert comp.candidate_filename("r3c1") == "r3c1.cu" and comp.candidate_filename("r3c1.cu") == "r3c1.cu"
    for bad in ("../x", "a/b.cu", "", "x y"):
        with pytest.raises(ValueError, match="plain file name"):
            comp.candidate_filename(bad)
    assert comp.safe_filename("runs/x/best.cu") == "best.cu" and comp.safe_filename("naive") == "naive.cu"
    assert comp.safe_filename("my kernel!.cu") == "my_kernel_.cu" and comp.safe_filename("") == "kernel.cu"


SM90A_ONLY = """#include <cuda_runtime.h>
__global__ void k(float* y) {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    y[threadIdx.x] = 1.0f;
}
extern "C" void solve(float* y, int n) { k<<<1, 32>>>(y); }
"""


def test_errors_name_the_candidates_file_and_keep_the_ptx_message(nvcc_path, tmp_path):
    """An sm_90a-only instruction built for sm_80 fails in ptxas: the error keeps the instruction and the
    message and points at the candidate's own file and line, not at a temporary PTX file."""
    r = compile_source(SM90A_ONLY, arch="sm_80", filename="r3c1", cache_root=tmp_path)
    assert not r.ok and r.filename == "r3c1.cu"
    assert r.errors.startswith("r3c1.cu:3: error: Instruction 'wgmma.fence' not supported on .target 'sm_80'"), r.errors
    assert "wgmma.fence.sync.aligned" in r.errors.splitlines()[1]       # the source line is quoted
    assert "Ptx assembly aborted" not in r.errors and "tmpxft" not in r.errors
    # the same source built under another name reuses the build and names the new file
    again = compile_source(SM90A_ONLY, arch="sm_80", filename="r4c2.cu", cache_root=tmp_path)
    assert again.cached and again.errors.startswith("r4c2.cu:3: error:") and "r3c1" not in again.errors
    # on Hopper the architecture-specific target assembles it
    ok = compile_source(SM90A_ONLY, arch="sm_90", filename="r3c1", cache_root=tmp_path)
    assert ok.ok and ok.arch == "sm_90a", ok.errors
    assert Path(ok.so_path).name == "r3c1.so"


def test_the_arch_shorthand_would_reject_wgmma(nvcc_path, tmp_path):
    """Why the build uses -gencode: nvcc 13.0's -arch=sm_90a shorthand also runs a compute_90 pass."""
    src = tmp_path / "w.cu"
    src.write_text(SM90A_ONLY)
    proc = subprocess.run([nvcc_path, "-arch=sm_90a", "-shared", "-Xcompiler", "-fPIC", "-o", str(tmp_path / "w.so"), str(src)],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode == 0:
        pytest.skip("this nvcc's -arch=sm_90a no longer adds a compute_90 pass")
    assert "not supported on .target 'sm_90'" in proc.stdout + proc.stderr


def test_build_rules_give_the_exact_command_and_the_hopper_rules(nvcc_path):
    rules = comp.build_rules("sm_90")
    cmd = " ".join(build_command(Path("candidate.cu"), Path("candidate.so"), "sm_90a"))
    assert cmd in rules and "-gencode=arch=compute_90a,code=sm_90a" in rules
    assert "__CUDA_ARCH_FEAT_SM90_ALL" in rules and "wgmma" in rules and "setmaxnreg" in rules
    assert 'cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled"' in rules and "__grid_constant__" in rules
    assert "dlopen" in rules and "cub::Device" in rules and "persisting-L2" in rules
    ampere = comp.build_rules("sm_80")
    assert "-gencode=arch=compute_80,code=sm_80" in ampere and "wgmma" not in ampere and "cuTensorMap" not in ampere
