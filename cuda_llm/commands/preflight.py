"""Preflight: is this machine and this endpoint fit for a run? Checked by `cuda-llm doctor`, and by `optimize`
and `resume` before anything is spent.

Each check gives one line: what was found, and for a problem what to do. A ``fail`` stops optimize/resume
(exit 2, no run created, no LLM call made); a ``warn`` is printed and the run goes on (profiling is optional:
a run without Nsight Compute still measures every candidate). The endpoint check is one cheap request per
distinct endpoint, model and key: GET /models, or a 1-token completion where a server has no /models; 401,
403 and 404 are named for what they are, sent once, never retried.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable, Literal, TextIO

from platformdirs import user_cache_dir
from pydantic import BaseModel

from cuda_llm.paths import CACHE_ENV
from cuda_llm.tools.device import device_probe

Level = Literal["ok", "warn", "fail"]
MIN_FREE_BYTES = 1 << 30          # below this a run fails to write candidates, logs and checkpoints
LOW_FREE_BYTES = 5 << 30          # below this, warn: an overnight run's cache and profiles grow
ENDPOINT_TIMEOUT_S = 15.0
CUDA_ERROR_NO_DEVICE = 100
CTRPERM_FIX = ("ERR_NVGPUCTRPERM: the driver lets only admin users read GPU performance counters "
               "(RmProfilingAdminOnly=1) and this process is not root. Fix: run as root, or in a container add "
               "--cap-add SYS_ADMIN, or on the host set `options nvidia NVreg_RestrictProfilingToAdminUsers=0` "
               "in /etc/modprobe.d and reload the driver (https://developer.nvidia.com/ERR_NVGPUCTRPERM); "
               "or run with --no-profile")


class Check(BaseModel):
    """One preflight line."""

    name: str
    level: Level
    detail: str

    @property
    def ok(self) -> bool:
        return self.level != "fail"

    def line(self) -> str:
        mark = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}[self.level]
        return f"{mark}  {self.name:<9} {self.detail}"


# ------------------------------------------------------------------------------------------- GPU
def _driver_problem() -> str | None:
    """Why the CUDA driver offers no device, in words; None when it offers one."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return ("no NVIDIA driver (libcuda.so.1 not found): run on a machine with an NVIDIA GPU and its driver "
                "(`nvidia-smi` must list the GPU); in a container, start it with --gpus all")
    rc = lib.cuInit(0)
    if rc == CUDA_ERROR_NO_DEVICE:
        return ("the NVIDIA driver sees no CUDA device (CUDA_ERROR_NO_DEVICE): check `nvidia-smi` and "
                "CUDA_VISIBLE_DEVICES")
    if rc != 0:
        return (f"the NVIDIA driver failed to start (cuInit error {rc}): check `nvidia-smi`; a driver and "
                "kernel-module version mismatch needs a reboot or a driver reinstall")
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return "the NVIDIA driver reports 0 CUDA devices: check `nvidia-smi` and CUDA_VISIBLE_DEVICES"
    return None


def check_gpu() -> Check:
    problem = _driver_problem()
    if problem:
        return Check(name="gpu", level="fail", detail=problem)
    ident = device_probe.device_identity()
    cc = device_probe.compute_capability()
    name, driver = ident if ident else ("CUDA device", "?")
    ver = f"{int(driver) // 1000}.{int(driver) % 1000 // 10}" if driver.isdigit() else driver
    arch = f" (sm_{cc[0]}{cc[1]})" if cc else ""
    return Check(name="gpu", level="ok", detail=f"{name}{arch}, driver supports CUDA {ver}")


# ---------------------------------------------------------------------------------------- pycuda
# Run in a child interpreter: the GPU worker is the only process that imports pycuda (tools/harness/gpu_worker.py)
_PYCUDA_PROBE = """
import json
try:
    import pycuda
    import pycuda.driver as cuda
except ModuleNotFoundError as exc:
    out = {"stage": "missing"} if (exc.name or "").split(".")[0] == "pycuda" else {"stage": "import", "error": repr(exc)}
except Exception as exc:
    out = {"stage": "import", "error": f"{type(exc).__name__}: {exc}"}
else:
    try:
        cuda.init()
        out = {"stage": "ok", "version": getattr(pycuda, "VERSION_TEXT", "?"), "driver": cuda.get_driver_version(),
               "devices": cuda.Device.count()}
    except Exception as exc:
        out = {"stage": "init", "error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(out))
"""


def cuda_toolkit_root() -> Path | None:
    """The CUDA toolkit folder that holds include/cuda.h (what pycuda's build must find when it guesses from an
    nvcc outside the toolkit, such as a wrapper script in /usr/local/bin); None when none is found."""
    from cuda_llm.tools.compiler.compile import CompileSetupError, nvcc_path   # off the `--help` path

    places = [Path(os.environ[k]) for k in ("CUDA_ROOT", "CUDA_HOME", "CUDA_PATH") if os.environ.get(k)]
    try:
        places.append(Path(os.path.realpath(nvcc_path())).parent.parent)
    except CompileSetupError:
        pass
    places += [Path("/usr/local/cuda"), *sorted(Path("/usr/local").glob("cuda-*"), reverse=True)]
    return next((p for p in places if (p / "include" / "cuda.h").is_file()), None)


def _toolkit_bin() -> str:
    root = cuda_toolkit_root()
    return f"{root}/bin" if root else "/path/to/cuda/bin"


def _pycuda_install_hint() -> str:
    """pycuda's build takes CUDA_ROOT from the first nvcc on PATH (its folder's parent) and looks for
    $CUDA_ROOT/include/cuda.h; a wrapper nvcc outside the toolkit (/usr/local/bin/nvcc) misleads it."""
    return (f"pip install -e '.[gpu]' (where its build says cuda.h is not found, put the toolkit's own nvcc first: "
            f"PATH={_toolkit_bin()}:$PATH pip install -e '.[gpu]')")


def check_pycuda(python: str | None = None, timeout_s: float = 120.0) -> Check:
    """pycuda imports and sees the driver, in a child interpreter like the GPU worker's."""
    try:
        proc = subprocess.run([python or sys.executable, "-c", _PYCUDA_PROBE], capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Check(name="pycuda", level="fail", detail=f"importing pycuda took more than {timeout_s:.0f} s")
    except OSError as exc:
        return Check(name="pycuda", level="fail", detail=f"could not start Python to import pycuda ({exc})")
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):     # the child died inside pycuda's import (a crash, not an exception)
        tail = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return Check(name="pycuda", level="fail", detail=f"importing pycuda ended the process ({tail[:200]})")
    stage, error = found.get("stage"), str(found.get("error", ""))[:200]
    if stage == "missing":
        return Check(name="pycuda", level="fail",
                     detail=f"pycuda is not installed (the GPU worker needs it): {_pycuda_install_hint()}")
    if stage == "import":
        return Check(name="pycuda", level="fail", detail=(
            f"pycuda is installed but does not load ({error}): without the NVIDIA driver (libcuda.so.1) it cannot; "
            f"otherwise rebuild it for this toolkit: PATH={_toolkit_bin()}:$PATH pip install --force-reinstall "
            f"--no-cache-dir --no-deps pycuda"))
    if stage == "init":
        return Check(name="pycuda", level="fail", detail=(
            f"pycuda loads but cannot start the driver ({error}): check `nvidia-smi` and CUDA_VISIBLE_DEVICES"))
    drv = found.get("driver")
    ver = f"{drv // 1000}.{drv % 1000 // 10}" if isinstance(drv, int) else "?"
    return Check(name="pycuda", level="ok",
                 detail=f"pycuda {found.get('version')}, driver supports CUDA {ver}, {found.get('devices')} device(s)")


# ------------------------------------------------------------------------------------------ nvcc
def check_nvcc(arch: str | None = None) -> Check:
    # the compile and ncu modules are imported in the checks, not at the top: `--help` loads this module
    from cuda_llm.tools.compiler.compile import CompileSetupError, nvcc_path, nvcc_version, resolve_arch

    try:
        nvcc = nvcc_path()
        version = nvcc_version(nvcc)
        target = resolve_arch(arch)
    except CompileSetupError as exc:
        return Check(name="nvcc", level="fail", detail=str(exc))
    try:
        listed = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=60).stdout.split()
    except (OSError, subprocess.SubprocessError):
        listed = []
    base = "compute_" + target.removeprefix("sm_").rstrip("af")
    if listed and base not in listed:
        return Check(name="nvcc", level="fail", detail=(
            f"nvcc {version} ({nvcc}) cannot build for {target}: it knows {', '.join(listed)}. Install a CUDA "
            f"toolkit that supports {target}, or pass --arch for the GPU you have"))
    return Check(name="nvcc", level="ok", detail=f"nvcc {version} ({nvcc}), target {target}")


# ------------------------------------------------------------------------------------------- ncu
def _profiling_admin_only(params: Path = Path("/proc/driver/nvidia/params")) -> bool | None:
    """The driver's RmProfilingAdminOnly setting (None where it cannot be read)."""
    try:
        for line in params.read_text().splitlines():
            if line.startswith("RmProfilingAdminOnly"):
                return line.split(":", 1)[1].strip() == "1"
    except OSError:
        return None
    return None


def check_ncu(*, params: Path = Path("/proc/driver/nvidia/params"), euid: int | None = None) -> Check:
    from cuda_llm.tools.profile.ncu import find_ncu, ncu_version   # off the `--help` path, as in check_nvcc

    ncu = find_ncu()
    if ncu is None:
        off = (os.environ.get("CUDA_LLM_NCU") or "").strip().lower() in {"none", "off", ""} and "CUDA_LLM_NCU" in os.environ
        why = "switched off by CUDA_LLM_NCU" if off else "ncu (Nsight Compute) not found on PATH, /usr/local/cuda/bin or /opt/nvidia"
        return Check(name="ncu", level="fail", detail=(
            f"{why}: candidates are measured but not profiled, and the critic works from timings only. Install "
            "Nsight Compute (part of the CUDA toolkit) or set CUDA_LLM_NCU=/path/to/ncu; or run with --no-profile"))
    version = ncu_version(ncu) or "?"
    euid = os.geteuid() if euid is None else euid
    if _profiling_admin_only(params) and euid != 0:
        return Check(name="ncu", level="fail", detail=f"ncu {version} ({ncu}) is installed but cannot profile: {CTRPERM_FIX}")
    return Check(name="ncu", level="ok", detail=f"ncu {version} ({ncu})")


# ----------------------------------------------------------------------------------------- disk
def _existing(path: Path) -> Path:
    path = Path(path).expanduser().absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_disk(paths: dict[str, Path], *, min_free: int = MIN_FREE_BYTES, low_free: int = LOW_FREE_BYTES) -> Check:
    """Free space where runs and the cache are written (``paths``: label -> folder)."""
    parts, level = [], "ok"
    for label, path in paths.items():
        where = _existing(path)
        if not os.access(where, os.W_OK):
            return Check(name="disk", level="fail", detail=f"{label} folder {path} is not writable ({where}); "
                         "pass another --runs-dir or set CUDA_LLM_CACHE")
        free = shutil.disk_usage(where).free
        parts.append(f"{label} {path}: {free / (1 << 30):.1f} GiB free")
        if free < min_free:
            return Check(name="disk", level="fail", detail=f"only {free / (1 << 20):.0f} MiB free for {label} at {where}; "
                         f"free at least {min_free >> 30} GiB, or pass another --runs-dir / set CUDA_LLM_CACHE")
        if free < low_free:
            level = "warn"
    return Check(name="disk", level=level, detail="; ".join(parts) + ("" if level == "ok" else " (low)"))


# ------------------------------------------------------------------------------------- endpoint
def _endpoints(settings: Any) -> list[tuple[list[str], Any]]:
    """Distinct (base_url, model, key) of the roles that call an endpoint (not the manual or rules ones),
    with the roles that use each."""
    seen: dict[tuple, list[str]] = {}
    first: dict[tuple, Any] = {}
    roles = settings.endpoint_roles() if hasattr(settings, "endpoint_roles") else ("planner", "coder", "critic")
    for role in roles:
        rs = settings.role(role)
        key = (rs.base_url, rs.model, rs.api_key)
        seen.setdefault(key, []).append(role)
        first.setdefault(key, rs)
    return [(roles, first[k]) for k, roles in seen.items()]


def check_endpoint(rs: Any, roles: Iterable[str] = (), *, timeout_s: float = ENDPOINT_TIMEOUT_S) -> Check:
    """One cheap request to ``rs``'s endpoint (RoleSettings): reachable, key accepted, model served."""
    import openai   # here, not at the top: the client library takes half a second, `--help` loads this module

    url = rs.base_url or "https://api.openai.com/v1"
    who = f"{rs.model} @ {url}" + (f" ({', '.join(roles)})" if roles else "")
    name = "endpoint"
    client = openai.OpenAI(base_url=url, api_key=rs.api_key, max_retries=0, timeout=timeout_s)

    def fail(text: str) -> Check:
        return Check(name=name, level="fail", detail=f"{who}: {text}")

    try:
        try:
            page = client.models.list()
            ids = [getattr(m, "id", None) for m in getattr(page, "data", None) or []]
            if not isinstance(page, openai.pagination.SyncPage) or any(not isinstance(i, str) for i in ids):
                return fail("the reply to GET /models is not an OpenAI model list: check that the base URL points at an "
                            "OpenAI-compatible API (usually ending in /v1), not a web page")
            if ids and rs.model not in ids:
                shown = ", ".join(sorted(ids)[:8]) + (" ..." if len(ids) > 8 else "")
                return fail(f"model {rs.model!r} is not served here (HTTP 200 from /models lists: {shown}); "
                            "pass --model with one of those")
            return Check(name=name, level="ok", detail=f"{who}: reachable, key accepted, model listed")
        except openai.NotFoundError:   # no /models route (some proxies): a 1-token completion instead
            client.chat.completions.create(model=rs.model, messages=[{"role": "user", "content": "ping"}], max_tokens=1)
            return Check(name=name, level="ok", detail=f"{who}: reachable, key accepted, model answered")
    except openai.AuthenticationError as exc:
        return fail(f"the API key was rejected (HTTP {exc.status_code}): check --api-key / OPENAI_API_KEY "
                    "(or the variable named by api_key_env in cuda-llm.toml)")
    except openai.PermissionDeniedError as exc:
        return fail(f"the API key may not use this model (HTTP {exc.status_code}): check the key's project and "
                    "permissions, or choose another --model")
    except openai.NotFoundError as exc:
        return fail(f"not found (HTTP {exc.status_code}): the model name is unknown to the server or the base URL "
                    "is wrong; check --model, and that --base-url ends in /v1")
    except openai.APITimeoutError:
        return fail(f"no answer within {timeout_s:g} s: is the server overloaded or still loading the model? "
                    "(doctor --timeout S waits longer)")
    except openai.APIConnectionError as exc:
        cause = exc.__cause__ or exc
        return fail(f"cannot connect ({type(cause).__name__}: {str(cause)[:120]}): check that the server is running "
                    "and the URL (--base-url / OPENAI_BASE_URL; local servers usually end in /v1)")
    except openai.BadRequestError as exc:
        return Check(name=name, level="warn", detail=f"{who}: reachable and the key accepted, but the 1-token probe "
                     f"was refused (HTTP 400: {str(exc)[:160]})")
    except openai.APIStatusError as exc:
        return fail(f"the server answered HTTP {exc.status_code}: {str(exc)[:160]}; check its logs")
    except (openai.APIResponseValidationError, ValueError, AttributeError, TypeError) as exc:  # an HTML page, say
        return fail(f"the reply is not OpenAI JSON ({type(exc).__name__}): check that the base URL points at an "
                    "OpenAI-compatible API (usually ending in /v1), not a web page or a proxy's error page")
    finally:
        client.close()


def check_llm(settings: Any, *, timeout_s: float = ENDPOINT_TIMEOUT_S) -> list[Check]:
    return [check_endpoint(rs, roles, timeout_s=timeout_s) for roles, rs in _endpoints(settings)]


# ---------------------------------------------------------------------------------------- all
def run_checks(settings: Any, *, runs_dir: Path, arch: str | None = None, profile: bool = True,
               gpu: bool = True, timeout_s: float = ENDPOINT_TIMEOUT_S, strict_ncu: bool = False) -> list[Check]:
    """Every check, machine first, endpoint last. ``settings`` None: the LLM is not checked (configuration
    errors are reported by the caller). A profiling problem fails only with ``strict_ncu`` (doctor)."""
    checks: list[Check] = []
    if gpu:
        checks += [check_gpu(), check_pycuda()]
    checks.append(check_nvcc(arch))
    if profile:
        ncu = check_ncu()
        if ncu.level == "fail" and not strict_ncu:
            ncu = ncu.model_copy(update={"level": "warn"})
        checks.append(ncu)
    cache = Path(os.environ[CACHE_ENV]) if os.environ.get(CACHE_ENV) else _user_cache()
    checks.append(check_disk({"runs": Path(runs_dir), "cache": cache}))
    if settings is not None:
        checks += check_llm(settings, timeout_s=timeout_s)
    return checks


def _user_cache() -> Path:
    return Path(user_cache_dir("cuda-llm"))


def failures(checks: Iterable[Check]) -> list[Check]:
    return [c for c in checks if c.level == "fail"]


def preflight_ok(command: str, settings: Any, *, runs_dir: Path, arch: str | None, profile: bool,
                 stream: TextIO | None = None, gpu: bool = True) -> bool:
    """The doctor's checks; each failure and warning one line on stderr. False when the run must not start.
    ``gpu=False``: the GPUs are elsewhere (a Ray cluster), so this machine's is not checked."""
    stream = stream or sys.stderr
    checks = run_checks(settings, runs_dir=runs_dir, arch=arch, profile=profile, gpu=gpu)
    bad = failures(checks)
    for c in checks:
        if c.level != "ok":
            print(f"cuda-llm {command}: {c.line()}", file=stream)
    if bad:
        print(f"cuda-llm {command}: {len(bad)} preflight check(s) failed; nothing was started or spent "
              "(`cuda-llm doctor` shows every check)", file=stream)
    return not bad
