"""The compilation verifier: nvcc turns a candidate into a shared object, or into errors an LLM can act on.

Every candidate is compiled with the flags of the candidate contract (``-arch=sm_XY -O3 -shared
-Xcompiler -fPIC -lineinfo -Xptxas -v``) plus ``-Xlinker --no-undefined``, so that a call to a function
that is declared but never defined fails here, with a line number, instead of when the worker loads the
library, and ``-cudart shared`` (with an rpath to the toolkit's runtime), so that the worker reads the
candidate's launch errors from the runtime they share. Results are cached on disk, keyed by the source, the flags, the compiler and the target
architecture: a candidate the loop has seen before costs nothing. Builds are written to a private
temporary folder and renamed into place, so parallel compiles (threads or processes) of the same source
are safe. A bad kernel never raises: it gives ``CompileResult(ok=False)`` with condensed errors; only a
broken set-up (no nvcc, an unknown architecture) raises ``CompileSetupError``.
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
from cuda_llm.tools.condense import condense_errors, extract_warnings
from cuda_llm.tools.ptxas import parse_ptxas
from cuda_llm.results import CompileResult

NVCC_ENV = "CUDA_LLM_NVCC"
ARCH_ENV = "CUDA_LLM_ARCH"
DEFAULT_ARCH = "sm_90"
SOURCE_NAME = "kernel.cu"
SO_NAME = "kernel.so"
BASE_FLAGS = ("-O3", "-shared", "-Xcompiler", "-fPIC", "-lineinfo", "-Xptxas", "-v", "-Xlinker", "--no-undefined",
              "-cudart", "shared")
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


@functools.lru_cache(maxsize=1)
def device_arch() -> str | None:
    """``sm_XY`` of CUDA device 0 from the driver (ctypes, no pycuda); None without driver or device."""
    from cuda_llm.tools.device_probe import compute_capability

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
    """The nvcc command line for one candidate (``libs`` are names like ``cublas`` or ``-lcublas``)."""
    from cuda_llm.tools.libraries import link_flags

    nvcc = nvcc_path()
    link = link_flags(libs)     # the toolkit's library, or NVIDIA's pip wheel of it
    return [nvcc, f"-arch={arch}", *BASE_FLAGS, *runtime_rpath(nvcc), *extra_flags, str(src), "-o", str(so), *link]


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
) -> CompileResult:
    """Compile one candidate into ``<cache>/builds/<key>/kernel.so``; never raises for a bad kernel.

    ``cache=False`` compiles again and replaces the cached build. Timed-out and killed compiles are not
    cached. ``seconds`` is the time this call took (small on a cache hit).
    """
    start = time.monotonic()
    arch = resolve_arch(arch)
    nvcc = nvcc_path()
    rel_cmd = build_command(Path(SOURCE_NAME), Path(SO_NAME), arch, extra_flags, libs)
    key = source_hash(source, *rel_cmd[1:], _version_text(nvcc), nvcc, arch)
    root = Path(cache_root or cache_dir()) / "builds"
    root.mkdir(parents=True, exist_ok=True)
    final = root / key
    command = [nvcc, *[_absolute(a, final) for a in rel_cmd[1:]]]

    hit = _load_cached(final) if cache else None
    if hit is not None:
        hit.cached = True
        hit.seconds = time.monotonic() - start
        return hit
    stale = final.exists()      # a broken or incomplete entry, or cache=False: replace it

    work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    try:
        (work / SOURCE_NAME).write_text(source)
        rc, log, timed_out = _run(rel_cmd, cwd=work, timeout_s=timeout_s)
        ok = rc == 0 and not timed_out and (work / SO_NAME).is_file()
        if timed_out:
            errors = (
                f"nvcc did not finish within {timeout_s:g} s and was stopped. Make the code cheaper to compile "
                f"(fewer fully unrolled loops, fewer template instantiations, smaller local arrays)."
            )
        elif ok:
            errors = ""
        else:
            errors = condense_errors(log, source, filename=SOURCE_NAME) or f"nvcc exited with code {rc} and printed nothing"
        result = CompileResult(
            ok=ok,
            arch=arch,
            source_hash=key,
            so_path=str(final / SO_NAME) if ok else None,
            command=command,
            log=_clip(log, final / "compile.log"),
            errors=errors,
            warnings=extract_warnings(log, filename=SOURCE_NAME),
            kernels=parse_ptxas(log) if not timed_out else [],
            timed_out=timed_out,
        )
        (work / "compile.log").write_text(log)
        (work / "result.json").write_text(result.model_dump_json(indent=1))
        if not timed_out and rc >= 0:          # killed or timed-out builds are not reproducible facts
            _publish(work, final, replace=stale)
        result.seconds = time.monotonic() - start
        return result
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def compile_many(sources: Sequence[str], *, jobs: int | None = None, **kw) -> list[CompileResult]:
    """Compile several candidates in parallel (threads around nvcc processes); results in input order."""
    if not sources:
        return []
    jobs = jobs if jobs is not None else (os.cpu_count() or 1)
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    # Resolve once so that every worker fails the same way on a broken set-up, before any work starts.
    kw["arch"] = resolve_arch(kw.get("arch"))
    nvcc_version()
    remove_stale_builds(Path(kw.get("cache_root") or cache_dir()) / "builds")
    with ThreadPoolExecutor(max_workers=min(jobs, len(sources))) as pool:
        return list(pool.map(lambda s: compile_source(s, **kw), sources))


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
def _absolute(arg: str, folder: Path) -> str:
    return str(folder / arg) if arg in (SOURCE_NAME, SO_NAME) else arg


def _run(cmd: list[str], *, cwd: Path, timeout_s: float) -> tuple[int, str, bool]:
    """Run nvcc in its own process group; on timeout the whole group (cicc, ptxas, host compiler) is killed."""
    from cuda_llm.tools.process_group import run_group

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
        so = final / SO_NAME
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

