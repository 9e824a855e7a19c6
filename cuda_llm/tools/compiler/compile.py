"""The compilation verifier: nvcc turns a candidate into a shared object, or into errors an LLM can act on.

Every candidate is compiled for exactly one target, the architecture-specific one where the device has
it (``-gencode=arch=compute_90a,code=sm_90a`` on Hopper: wgmma and setmaxnreg assemble only there, and
nvcc 13.0's ``-arch=sm_90a`` shorthand also runs a compute_90 pass that rejects them), with
``-O3 -shared -Xcompiler -fPIC -lineinfo -Xptxas -v``, plus:

- ``-Xlinker --no-undefined``: a call to a function that is declared but never defined fails here, with
  a line number, instead of when the worker loads the library;
- ``-cudart shared`` (with an rpath to the toolkit's runtime): the worker reads the candidate's launch
  errors from the runtime they share;
- ``-DCCCL_DISABLE_NVTX``: CUB's NVTX ranges would pull dlopen/dlsym/getenv into every object that
  includes ``<cub/cub.cuh>``, which the symbol check refuses; block-level CUB needs none of it;
- ``-keep``: the build keeps the host pass of the preprocessor (``<name>.cpp4.ii``), which the static
  rules read after macro expansion, and the PTX, which maps ptxas errors back to source lines.

After a successful build the result also records the shared object's undefined dynamic symbols, the
rules found in the preprocessed source and a summary of the machine code (which arithmetic units the
kernels use); symbols.check_build judges them. Results are cached on disk, keyed by the source, the
flags, the compiler, the target and the checks' own code: a candidate the loop has seen before costs
nothing. Builds are written to a private temporary folder and renamed into place, so parallel compiles
(threads or processes) of the same source are safe. A bad kernel never raises: it gives
``CompileResult(ok=False)`` with condensed errors; only a broken set-up (no nvcc, an unknown
architecture) raises ``CompileSetupError``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

from cuda_llm.paths import cache_dir
from cuda_llm.tools.compiler.condense import condense_errors, extract_warnings
from cuda_llm.tools.compiler.ptxas import parse_ptxas
from cuda_llm.results import CompileResult
from cuda_llm.tools.compiler import ptx, sass, static_check, symbols
from cuda_llm.tools.compiler.libraries import link_flags
from cuda_llm.tools.compiler.process_group import run_group
from cuda_llm.tools.compiler.ptx import flow_facts
from cuda_llm.tools.compiler.sass import read_sass
from cuda_llm.tools.compiler.static_check import check_preprocessed
from cuda_llm.tools.compiler.symbols import undefined_symbols
from cuda_llm.tools.device.device_probe import compute_capability

NVCC_ENV = "CUDA_LLM_NVCC"
ARCH_ENV = "CUDA_LLM_ARCH"
DEFAULT_ARCH = "sm_90"
SOURCE_NAME = "kernel.cu"
SO_NAME = "kernel.so"
KEEP_DIR = "nvcc-keep"
BASE_FLAGS = ("-O3", "-shared", "-Xcompiler", "-fPIC", "-lineinfo", "-Xptxas", "-v", "-Xlinker", "--no-undefined",
              "-cudart", "shared", "-DCCCL_DISABLE_NVTX", "-keep", "-keep-dir", KEEP_DIR)
# Compute capabilities with an architecture-specific target (sm_90a...) in nvcc 13.
ARCH_SPECIFIC = {90, 100, 101, 103, 110, 120, 121}
_FILENAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,100}$")
_NVCC_PLACES = ("/usr/local/bin/nvcc", "/usr/local/cuda/bin/nvcc")
_ARCH = re.compile(r"^sm_(\d{2,3})([af]?)$")


class CompileSetupError(RuntimeError):
    """The compiler cannot be used at all (not installed, wrong architecture name): fix the set-up."""


# --------------------------------------------------------------------------------------------- arch
def resolve_arch(arch: str | None = None) -> str:
    """The target architecture: ``arch`` if given, else $CUDA_LLM_ARCH, else the first device's compute
    capability, else ``sm_90``. Accepts ``sm_90``, ``sm_90a``, ``90`` or ``9.0``."""
    for candidate, origin in ((arch, "--arch"), (os.environ.get(ARCH_ENV), f"${ARCH_ENV}")):
        if candidate:
            return normalize_arch(candidate, origin=origin)
    return device_arch() or DEFAULT_ARCH


def normalize_arch(value: str, *, origin: str = "arch") -> str:
    """``"9.0"``, ``"90"``, ``"sm90"`` -> ``"sm_90"``; anything else is refused with an example."""
    v = value.strip().lower().replace("compute_", "sm_")
    if re.fullmatch(r"\d+\.\d+", v):
        major, minor = v.split(".")
        v = f"sm_{major}{minor}"
    elif re.fullmatch(r"\d{2,3}[af]?", v):
        v = f"sm_{v}"
    elif re.fullmatch(r"sm\d{2,3}[af]?", v):
        v = "sm_" + v[2:]
    if not _ARCH.match(v):
        raise CompileSetupError(
            f"{origin}: {value!r} is not a CUDA architecture; use the form sm_XY, e.g. sm_90 for H100, "
            f"sm_80 for A100, sm_89 for L4/RTX 40xx"
        )
    return v


def build_target(arch: str) -> str:
    """The target a candidate is built for: the architecture-specific one where there is one (``sm_90`` ->
    ``sm_90a``), so Hopper's wgmma, setmaxnreg and the like assemble; already suffixed names stay."""
    m = _ARCH.match(arch)
    if m is None:
        raise CompileSetupError(f"{arch!r} is not a CUDA architecture; use the form sm_XY, e.g. sm_90")
    number, suffix = int(m.group(1)), m.group(2)
    return f"sm_{number}a" if not suffix and number in ARCH_SPECIFIC else arch


def gencode(target: str) -> str:
    """``-gencode=arch=compute_90a,code=sm_90a``: machine code for exactly this target, no PTX pass for
    another (the -arch shorthand adds a compute_90 pass that rejects sm_90a-only instructions)."""
    return f"-gencode=arch=compute_{target[3:]},code={target}"


@functools.lru_cache(maxsize=1)
def device_arch() -> str | None:
    """``sm_XY`` of CUDA device 0 from the driver (ctypes, no pycuda); None without driver or device."""
    cc = compute_capability()
    return f"sm_{cc[0]}{cc[1]}" if cc else None


# --------------------------------------------------------------------------------------------- nvcc
def nvcc_path() -> str:
    """The nvcc to use: $CUDA_LLM_NVCC, else nvcc on PATH, /usr/local/bin, /usr/local/cuda/bin."""
    env = os.environ.get(NVCC_ENV)
    if env:
        found = shutil.which(env)
        if found is None:
            raise CompileSetupError(
                f"${NVCC_ENV} is {env!r}, which is not an executable file; point it at nvcc "
                f"(e.g. /usr/local/cuda/bin/nvcc) or unset it"
            )
        return found
    found = shutil.which("nvcc")
    if found:
        return found
    for place in (*_NVCC_PLACES, *(f"{os.environ[k]}/bin/nvcc" for k in ("CUDA_HOME", "CUDA_PATH") if k in os.environ)):
        if os.access(place, os.X_OK):
            return place
    raise CompileSetupError(
        "nvcc not found (looked at $CUDA_LLM_NVCC, PATH, /usr/local/bin, /usr/local/cuda/bin, $CUDA_HOME/bin). "
        "Install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads, or e.g. `apt install cuda-toolkit-13-0`) "
        f"and put its bin folder on PATH, or set ${NVCC_ENV}=/path/to/nvcc"
    )


@functools.lru_cache(maxsize=8)
def _version_text(nvcc: str) -> str:
    try:
        proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise CompileSetupError(f"{nvcc} --version failed: {exc}; check the CUDA toolkit installation") from exc
    if proc.returncode != 0:
        raise CompileSetupError(
            f"{nvcc} --version exited with {proc.returncode}: {(proc.stderr or proc.stdout).strip()[:300]}"
        )
    return proc.stdout.strip()


def nvcc_version(nvcc: str | None = None) -> str:
    """The compiler release, e.g. ``13.0.88`` (asked once per nvcc path)."""
    text = _version_text(nvcc or nvcc_path())
    m = re.search(r"\bV(\d+\.\d+\.\d+)", text) or re.search(r"release (\d+\.\d+)", text)
    return m.group(1) if m else (text.splitlines()[-1] if text else "unknown")


_PTX_VERSION = re.compile(r"^\s*\.version\s+(\d+\.\d+)", re.M)


@functools.lru_cache(maxsize=8)
def ptx_isa_version(nvcc: str, arch: str) -> str:
    """The PTX ISA version this nvcc emits for ``arch`` (from the ``.version`` line of a tiny kernel); "" when
    it cannot say (the prompt then leaves the ISA out)."""
    with tempfile.TemporaryDirectory(prefix="cuda-llm-ptx-") as tmp:
        src = Path(tmp) / "probe.cu"
        src.write_text("__global__ void probe() {}\n")
        try:
            proc = subprocess.run([nvcc, f"-arch={arch}", "-ptx", str(src), "-o", str(Path(tmp) / "probe.ptx")],
                                  capture_output=True, text=True, timeout=120)
            text = (Path(tmp) / "probe.ptx").read_text() if proc.returncode == 0 else ""
        except (OSError, subprocess.SubprocessError):
            text = ""
    m = _PTX_VERSION.search(text)
    return m.group(1) if m else ""


@functools.lru_cache(maxsize=8)
def runtime_rpath(nvcc: str) -> tuple[str, ...]:
    """Linker flags that make the .so find the shared CUDA runtime of this very toolkit, wherever the
    loader's own search path points: nvcc's dry run names its library folders."""
    try:
        proc = subprocess.run([nvcc, "-dryrun", "-shared", "-cudart", "shared", "-o", os.devnull, "rpath.cu"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ()
    for line in (proc.stdout + proc.stderr).splitlines():
        if "LIBRARIES=" in line:
            for folder in re.findall(r'-L"?([^"\s]+)"?', line):
                if not folder.endswith("stubs") and any(Path(folder).glob("libcudart.so*")):
                    return ("-Xlinker", f"-rpath,{os.path.realpath(folder)}")
    return ()


def build_command(
    src: Path, so: Path, arch: str, extra_flags: Sequence[str] = (), libs: Sequence[str] = ()
) -> list[str]:
    """The nvcc command line for one candidate (``libs`` are names like ``cublas`` or ``-lcublas``);
    ``arch`` is resolved to its build target (sm_90 -> sm_90a)."""
    nvcc = nvcc_path()
    link = link_flags(libs)     # the toolkit's library, or NVIDIA's pip wheel of it
    return [nvcc, gencode(build_target(arch)), *BASE_FLAGS, *runtime_rpath(nvcc), *extra_flags, str(src), "-o", str(so),
            *link]


def build_rules(arch: str) -> str:
    """What the coder must know about the build, for its prompt: the exact nvcc line candidates are
    built with, what the target allows, how to get a TMA tensor map, and which calls are allowed."""
    target = build_target(normalize_arch(arch))
    cmd = " ".join(build_command(Path("candidate.cu"), Path("candidate.so"), target))
    number = int(re.sub(r"\D", "", target))
    lines = [
        f"Build: every candidate is compiled alone, with exactly this command:\n  {cmd}",
        f"Target: {target} only (machine code for this GPU, no PTX for others). -lineinfo is on, so errors and "
        f"profiles point at your lines; ptxas reports registers, shared memory and spills per kernel.",
    ]
    if number == 90:
        lines.append(
            "Hopper: the build is for sm_90a, the architecture-specific target, so wgmma.mma_async, "
            "wgmma.fence/commit_group/wait_group, setmaxnreg and the other sm_90a-only instructions assemble. "
            "Device code sees __CUDA_ARCH__ == 900 and __CUDA_ARCH_FEAT_SM90_ALL defined; guard sm_90a-only code "
            "with `#if defined(__CUDA_ARCH_FEAT_SM90_ALL)` if the file must also build elsewhere (with "
            "nvcc -arch=sm_90a a second compute_90 pass rejects unguarded wgmma). TMA (cp.async.bulk, "
            "cp.async.bulk.tensor), mbarrier, thread-block clusters and distributed shared memory are plain "
            "sm_90 and need no guard.")
    elif target.endswith("a"):
        lines.append(f"The build is for {target}, the architecture-specific target: its arch-specific instructions "
                     f"assemble; __CUDA_ARCH_SPECIFIC__ is defined in device code.")
    if number >= 90:
        lines.append(
            "TMA tensor maps: libcuda is not linked, so do not call cuTensorMapEncodeTiled directly; fetch it "
            "from the runtime by its literal name:\n"
            "  #include <cuda.h>\n  #include <cudaTypedefs.h>\n"
            "  PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;\n"
            "  cudaDriverEntryPointQueryResult q;\n"
            "  cudaGetDriverEntryPointByVersion(\"cuTensorMapEncodeTiled\", (void**)&encode, 12000, "
            "cudaEnableDefault, &q);\n"
            "Pass the CUtensorMap to the kernel by value as `const __grid_constant__ CUtensorMap map`. The global "
            "address must be 16-byte aligned (every buffer the harness passes is 256-byte aligned) and every "
            "global stride a multiple of 16 bytes; fall back to plain loads for shapes where it is not.")
    tma = ", cudaGetDriverEntryPointByVersion for the TMA encoders (cuTensorMapEncodeTiled/Im2col) only" if number >= 90 else ""
    lines.append(
        f"Host code may call: the CUDA runtime (cuda*){tma}, libc/libm math, memory and string functions, printf/fprintf to "
        "stdout/stderr, malloc/free, operator new/delete, and header-only C++ (containers, algorithms). "
        "Block- and warp-level CUB (cub::BlockReduce, cub::WarpScan...) and cooperative groups are fine.")
    lines.append(
        "Refused (static_error, naming the symbol or line): dlopen/dlsym, system/exec*/fork/popen, syscall and "
        "host inline assembly that makes system calls, files and sockets, exit/abort, getenv, host threads, "
        "sleeps, signals, the Python C API, libraries that do the work (cuBLAS, cuDNN, thrust, device-wide "
        "cub::Device*, CUTLASS device operators), raising the persisting-L2 limit or setting access-policy "
        "windows, and cudaDeviceReset. These are checked on the preprocessed source and on the linked "
        "object's symbols, so macros, token pasting or `using namespace cub;` do not hide them.")
    return "\n".join(lines)


def source_hash(source: str, *parts: str) -> str:
    """Short content hash (sha256, 16 hex digits) of a source and whatever else identifies a build."""
    h = hashlib.sha256(source.encode())
    for p in parts:
        h.update(b"\0")
        h.update(p.encode())
    return h.hexdigest()[:16]


# ------------------------------------------------------------------------------------------ compile
def compile_source(
    source: str,
    *,
    arch: str | None = None,
    extra_flags: Sequence[str] = (),
    libs: Sequence[str] = (),
    timeout_s: float = 120.0,
    cache: bool = True,
    cache_root: Path | None = None,
    filename: str = SOURCE_NAME,
) -> CompileResult:
    """Compile one candidate into ``<cache>/builds/<key>/<name>.so``; never raises for a bad kernel.

    ``filename`` is the name the compiler sees (``r3c1.cu`` for candidate r3c1), so every error and
    warning names the candidate's own file; the cache key does not depend on it (a cached build found
    under another name is reported under this one). ``cache=False`` compiles again and replaces the
    cached build. Timed-out and killed compiles are not cached. ``seconds`` is the time this call took
    (small on a cache hit).
    """
    start = time.monotonic()
    filename = candidate_filename(filename)
    so_name = filename[:-3] + ".so"
    arch = resolve_arch(arch)
    target = build_target(arch)
    nvcc = nvcc_path()
    key_cmd = build_command(Path(SOURCE_NAME), Path(SO_NAME), target, extra_flags, libs)
    rel_cmd = build_command(Path(filename), Path(so_name), target, extra_flags, libs)
    key = source_hash(source, *key_cmd[1:], _version_text(nvcc), nvcc, target, _checks_fingerprint())
    root = Path(cache_root or cache_dir()) / "builds"
    root.mkdir(parents=True, exist_ok=True)
    final = root / key
    command = [nvcc, *[_absolute(a, final, filename, so_name) for a in rel_cmd[1:]]]

    hit = _load_cached(final) if cache else None
    if hit is not None:
        hit = _renamed(hit, filename)
        hit.cached = True
        hit.seconds = time.monotonic() - start
        return hit
    stale = final.exists()      # a broken or incomplete entry, or cache=False: replace it

    work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    try:
        (work / filename).write_text(source)
        (work / KEEP_DIR).mkdir()
        rc, log, timed_out = _run(rel_cmd, cwd=work, timeout_s=timeout_s)
        ok = rc == 0 and not timed_out and (work / so_name).is_file()
        if timed_out:
            errors = (
                f"nvcc did not finish within {timeout_s:g} s and was stopped. Make the code cheaper to compile "
                f"(fewer fully unrolled loops, fewer template instantiations, smaller local arrays)."
            )
        elif ok:
            errors = ""
        else:
            ptx = _read_kept(work, filename, ".ptx")
            errors = (condense_errors(log, source, filename=filename, ptx=ptx)
                      or f"nvcc exited with code {rc} and printed nothing")
        result = CompileResult(
            ok=ok,
            arch=target,
            source_hash=key,
            so_path=str(final / so_name) if ok else None,
            command=command,
            log=_clip(log, final / "compile.log"),
            errors=errors,
            warnings=extract_warnings(log, filename=filename),
            kernels=parse_ptxas(log) if not timed_out else [],
            timed_out=timed_out,
            filename=filename,
        )
        if ok:
            _inspect_build(result, work, so_name, has_libraries=bool(libs))
        shutil.rmtree(work / KEEP_DIR, ignore_errors=True)
        (work / "compile.log").write_text(log)
        (work / "result.json").write_text(result.model_dump_json(indent=1))
        if not timed_out and rc >= 0:          # killed or timed-out builds are not reproducible facts
            _publish(work, final, replace=stale)
        result.seconds = time.monotonic() - start
        return result
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def compile_many(sources: Sequence[str], *, jobs: int | None = None, filenames: Sequence[str] | None = None,
                 **kw) -> list[CompileResult]:
    """Compile several candidates in parallel (threads around nvcc processes); results in input order.
    ``filenames`` (one per source) name each candidate's file as compile_source's ``filename`` does."""
    if not sources:
        return []
    jobs = jobs if jobs is not None else (os.cpu_count() or 1)
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    names = list(filenames) if filenames is not None else [SOURCE_NAME] * len(sources)
    if len(names) != len(sources):
        raise ValueError(f"{len(sources)} sources but {len(names)} file names")
    # Resolve once so that every worker fails the same way on a broken set-up, before any work starts.
    kw["arch"] = resolve_arch(kw.get("arch"))
    nvcc_version()
    remove_stale_builds(Path(kw.get("cache_root") or cache_dir()) / "builds")
    with ThreadPoolExecutor(max_workers=min(jobs, len(sources))) as pool:
        return list(pool.map(lambda sn: compile_source(sn[0], filename=sn[1], **kw), zip(sources, names)))


def remove_stale_builds(builds: Path, *, max_age_s: float = 3600.0) -> int:
    """Delete temporary build folders left by compiles that were killed (older than ``max_age_s``)."""
    removed = 0
    try:
        entries = [p for p in builds.iterdir() if p.name.startswith(".")]
    except OSError:
        return 0
    now = time.time()
    for p in entries:
        try:
            if now - p.stat().st_mtime > max_age_s:
                shutil.rmtree(p, ignore_errors=True)
                removed += 1
        except OSError:
            continue
    return removed


# ---------------------------------------------------------------------------------------- internals
def candidate_filename(name: str) -> str:
    """``r3c1`` or ``r3c1.cu`` -> ``r3c1.cu``; anything that is not a plain file name is refused."""
    name = name.strip()
    if not name.endswith(".cu"):
        name += ".cu"
    if not _FILENAME.match(name) or name in (".cu", "..cu"):
        raise ValueError(f"filename {name!r} must be a plain file name of letters, digits, '_', '-' and '.', "
                         f"e.g. r3c1.cu")
    return name


def safe_filename(name: str | None) -> str:
    """A file name for any candidate label (``r3c1``, ``runs/x/best.cu``, ``naive``): its base name with
    other characters replaced, ``kernel.cu`` when nothing is left. Never raises."""
    base = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(name or "").name).lstrip(".")
    base = base[:-3] if base.endswith(".cu") else base
    return candidate_filename(base[:80]) if base.strip("_.-") else SOURCE_NAME


def _absolute(arg: str, folder: Path, *names: str) -> str:
    return str(folder / arg) if arg in names or arg == KEEP_DIR else arg


def _renamed(result: CompileResult, filename: str) -> CompileResult:
    """A cached build reported under the name this call asked for."""
    old = result.filename
    if old == filename:
        return result
    swap = (lambda text: text.replace(old, filename)) if old else (lambda text: text)
    return result.model_copy(update={
        "filename": filename, "errors": swap(result.errors), "log": swap(result.log),
        "warnings": [swap(w) for w in result.warnings],
    })


@functools.lru_cache(maxsize=1)
def _checks_fingerprint() -> str:
    """The code of the checks whose findings a cached build stores: a new rule invalidates old entries."""
    h = hashlib.sha256()
    files = [Path(mod.__file__) for mod in (static_check, symbols, sass)]
    for path in files + sorted(Path(ptx.__file__).parent.glob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def _read_kept(work: Path, filename: str, suffix: str) -> str | None:
    """An intermediate file nvcc kept (``r3c1.cpp4.ii``, ``r3c1.ptx``), or None."""
    path = work / KEEP_DIR / (filename[:-3] + suffix)
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _inspect_build(result: CompileResult, work: Path, so_name: str, *, has_libraries: bool) -> None:
    """Facts about a successful build for the checks and the speed-of-light bound: the rules found in the
    preprocessed host source, the undefined dynamic symbols, and the machine code's arithmetic units
    (not read when a vendor library is linked: its kernels are not in this object)."""
    host = _read_kept(work, result.filename, ".cpp4.ii")
    if host is not None:
        result.source_issues = check_preprocessed(host, result.filename)
    try:
        result.undefined_symbols = undefined_symbols(work / so_name)
    except RuntimeError as exc:     # no ELF reader at all: a set-up problem, not the kernel's
        raise CompileSetupError(str(exc)) from exc
    except (OSError, ValueError):   # not an ELF shared object: fail closed, the check refuses this name
        result.undefined_symbols = ["<unreadable shared object>"]
    result.sass = None if has_libraries else read_sass(work / so_name)
    if result.sass is not None:
        ptx = _read_kept(work, result.filename, ".ptx")
        if ptx is not None:
            try:
                result.sass.flow = flow_facts(ptx)
            except Exception:  # noqa: BLE001 - PTX the analysis cannot read: no facts, the source rules decide;
                result.sass.flow = {}   # a detector never fails a build


def _run(cmd: list[str], *, cwd: Path, timeout_s: float) -> tuple[int, str, bool]:
    """Run nvcc in its own process group; on timeout the whole group (cicc, ptxas, host compiler) is killed."""
    try:
        got = run_group(cmd, cwd=cwd, timeout_s=timeout_s, merge_stderr=True)
    except OSError as exc:
        raise CompileSetupError(f"cannot run {cmd[0]}: {exc}") from exc
    return (-9 if got.rc is None else got.rc), got.stdout, got.timed_out


MAX_LOG_CHARS = 100_000


def _clip(log: str, full: Path) -> str:
    """Keep the head and tail of a huge log in the result (thousands of template errors); the whole log
    stays in compile.log beside the build."""
    if len(log) <= MAX_LOG_CHARS:
        return log
    half = MAX_LOG_CHARS // 2
    return f"{log[:half]}\n... ({len(log) - 2 * half} characters cut; full log in {full}) ...\n{log[-half:]}"


def _load_cached(final: Path) -> CompileResult | None:
    try:
        result = CompileResult.model_validate_json((final / "result.json").read_text())
    except (OSError, ValueError):
        return None
    if result.ok:
        so = final / (result.filename[:-3] + ".so")
        if not so.is_file():
            return None
        result.so_path = str(so)
    return result


def _publish(work: Path, final: Path, *, replace: bool) -> None:
    """Move a finished build into place atomically; an identical build that got there first wins."""
    if replace and final.exists():
        trash = Path(tempfile.mkdtemp(prefix=".old-", dir=final.parent))
        try:
            os.rename(final, trash / "build")
        except OSError:
            pass
        shutil.rmtree(trash, ignore_errors=True)
    try:
        os.rename(work, final)
    except OSError:
        # Another compile of the same key published first (rename onto a non-empty folder fails);
        # its files are equivalent. A stale incomplete folder (no result.json) is replaced.
        if not (final / "result.json").is_file():
            shutil.rmtree(final, ignore_errors=True)
            try:
                os.rename(work, final)
            except OSError:
                pass

