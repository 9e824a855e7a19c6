"""Run Nsight Compute on one candidate and parse what it reports. Never raises for a profiling failure.

The candidate runs inside the GPU worker (``python -m cuda_llm.tools.harness.gpu_worker run-once``), which
brackets only the solve() calls with cuProfilerStart/Stop, so ``--profile-from-start off`` sees only the
candidate's kernels. ncu writes a report (kept in ``out_dir``), which is then read back as the raw CSV
page (``ncu --import``) so that the program's own output never mixes with the table.

Where ncu is missing, lacks permission (ERR_NVGPUCTRPERM) or the target fails, the result is
``available=False`` with a ``reason``; the reason is logged once per process, and the caller goes on
with timings and the compile report.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from cuda_llm.tools.profile.ncu_parse import NcuParseError, profile_from_text
from cuda_llm.tools.profile.profile_models import ProfileOptions, ProfileResult
from cuda_llm.tools.compiler.process_group import run_group
from cuda_llm.tools.harness.runner import device_lock, pinned_device

log = logging.getLogger(__name__)

NCU_ENV = "CUDA_LLM_NCU"            # path of the ncu to use, or "none" to switch profiling off
# SourceCounters (branch uniformity, per-line stalls) doubled the profiling time of a 17 ms kernel on an
# H100 (5.3 s -> 10.3 s) and added nothing the rules need, so it is opt-in (ProfileOptions.source_counters).
# ComputeWorkloadAnalysis (pipe utilization, IPC: which pipe a compute-bound kernel saturates, tensor cores
# or FMA) and InstructionStats (instructions executed and issued) feed the diagnosis's compute side.
DEFAULT_SECTIONS: tuple[str, ...] = ("SpeedOfLight", "Occupancy", "LaunchStats", "MemoryWorkloadAnalysis",
                                     "WarpStateStats", "ComputeWorkloadAnalysis", "InstructionStats")
SOURCE_COUNTERS = "SourceCounters"
# Metrics beyond the sections: spills, bank conflicts, divergence, DRAM bytes, coalescing (sectors/request).
EXTRA_METRICS: tuple[str, ...] = (
    "dram__bytes_read.sum", "dram__bytes_write.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "smsp__thread_inst_executed_per_inst_executed.ratio",
)
MAX_LAUNCHES = 200                  # profile at most this many kernel launches per run

_WARNED: set[str] = set()


def warn_once(reason: str) -> bool:
    """Log why profiling is off, once per kind of reason per process. True when it was logged now."""
    key = reason.split(":")[0]
    if key in _WARNED:
        return False
    _WARNED.add(key)
    log.warning("Nsight Compute profiling unavailable: %s", reason)
    return True


def find_ncu(override: str | None = None) -> str | None:
    """The ncu executable: ``override``, $CUDA_LLM_NCU, PATH, /usr/local/cuda/bin, /opt/nvidia/nsight-compute/*.

    None when none is found or the override is "none".
    """
    choice = override if override is not None else os.environ.get(NCU_ENV)
    if choice is not None:
        if choice.strip().lower() in {"", "none", "off"}:
            return None
        found = shutil.which(choice)
        return found
    found = shutil.which("ncu")
    if found:
        return found
    candidates = ["/usr/local/cuda/bin/ncu", *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True),
                  *sorted(glob.glob("/usr/local/cuda-*/bin/ncu"), reverse=True)]
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def ncu_version(ncu: str) -> str | None:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        if "Version" in line:
            return line.split("Version", 1)[1].strip().split()[0]
    return None


def build_command(ncu: str, target: Sequence[str], report_base: Path, *, sections: Sequence[str] = DEFAULT_SECTIONS,
                  metrics: Sequence[str] = EXTRA_METRICS, max_launches: int = MAX_LAUNCHES) -> list[str]:
    """The ncu command line around ``target`` (the worker's argv). Clocks are left as the card runs them."""
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
           "--launch-count", str(max_launches), "-f", "--export", str(report_base)]
    for s in sections:
        cmd += ["--section", s]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    cmd += ["--csv", "--page", "raw"]
    return cmd + list(target)


def import_command(ncu: str, report: Path) -> list[str]:
    return [ncu, "--import", str(report), "--csv", "--page", "raw"]


def classify_failure(output: str, returncode: int | None) -> str:
    """One line saying why ncu gave no metrics, from its output."""
    text = output or ""
    if "ERR_NVGPUCTRPERM" in text or "permission to access NVIDIA GPU Performance Counters" in text:
        return ("ERR_NVGPUCTRPERM: no permission to read GPU performance counters (run as root, or set "
                "NVreg_RestrictProfilingToAdminUsers=0; see https://developer.nvidia.com/ERR_NVGPUCTRPERM)")
    app_failed = re.search(r"application returned an error code \((\d+)\)", text)
    if app_failed or (returncode not in (0, None) and "No kernels were profiled" in text):
        code = app_failed.group(1) if app_failed else returncode
        return f"the profiled program failed (exit code {code}): " + _last_error(_program_lines(text))
    if "No kernels were profiled" in text:
        return "no kernels were profiled: solve() launched no kernel between cuProfilerStart and cuProfilerStop"
    if "Failed to find metric" in text or "Failed to find section" in text:
        return "this ncu does not know a requested metric or section: " + _last_error(text)
    if "ERR_NVGPU" in text or "==ERROR==" in text:
        return "ncu failed: " + _last_error(text)
    return f"the profiled program failed (exit code {returncode}): " + _last_error(text)


def _program_lines(text: str) -> str:
    """The profiled program's own output: ncu's ==PROF==/==WARNING==/==ERROR== lines removed."""
    kept = [ln for ln in text.splitlines() if not ln.startswith("==")]
    return "\n".join(kept) or text


def _last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errs = [ln for ln in lines if "ERROR" in ln or "Error" in ln or "error" in ln]
    picked = errs[-2:] if errs else lines[-2:]
    return " | ".join(picked)[:400] or "no output"


def _run(cmd: list[str], timeout_s: float, env: dict[str, str] | None = None, cwd: str | None = None) -> tuple[int | None, str, bool]:
    """Run in its own process group; on timeout the whole group (ncu and the target) is killed."""
    got = run_group(cmd, timeout_s=timeout_s, env=env, cwd=cwd, merge_stderr=True)
    return got.rc, got.stdout, got.timed_out


def profile_command(target: Sequence[str], *, out_dir: Path, timeout_s: float = 180.0, ncu_path: str | None = None,
                    sections: Sequence[str] = DEFAULT_SECTIONS, metrics: Sequence[str] = EXTRA_METRICS,
                    repeat: int = 1, name: str = "profile", env: dict[str, str] | None = None,
                    sizes: dict | None = None, max_launches: int = MAX_LAUNCHES) -> ProfileResult:
    """Profile any program that brackets its work with cuProfilerStart/Stop. Never raises for ncu trouble."""
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    fields: dict = {"sizes": dict(sizes or {})}

    def unavailable(reason: str, **kw) -> ProfileResult:
        warn_once(reason)
        return ProfileResult(available=False, reason=reason, seconds=time.perf_counter() - t0, **fields, **kw)

    ncu = find_ncu(ncu_path)
    if ncu is None:
        return unavailable("ncu not found: install Nsight Compute (it comes with the CUDA toolkit) or set "
                           f"${NCU_ENV} to its path")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return unavailable(f"cannot create {out_dir}: {exc}")
    fields["ncu_version"] = ncu_version(ncu)
    report_base = out_dir / name
    report = out_dir / f"{name}.ncu-rep"
    cmd = build_command(ncu, target, report_base, sections=sections, metrics=metrics, max_launches=max_launches)
    deadline = t0 + timeout_s
    try:
        rc, output, timed_out = _run(cmd, timeout_s, env=env)
        if rc not in (0, None) and metrics and ("Failed to find metric" in output):
            # an older or newer ncu without one of the extra metrics: the sections alone still say a lot
            log.info("retrying ncu without the extra metrics: %s", _last_error(output))
            cmd = build_command(ncu, target, report_base, sections=sections, metrics=(), max_launches=max_launches)
            rc, output, timed_out = _run(cmd, max(1.0, deadline - time.perf_counter()), env=env)
    except OSError as exc:
        return unavailable(f"cannot run {ncu}: {exc}", command=cmd)
    (out_dir / f"{name}.log").write_text(output)
    if timed_out:
        return unavailable(f"ncu timed out after {timeout_s:.0f} s (the report so far is in {out_dir})", command=cmd)
    text = output
    csv_path = None
    if report.exists():
        try:
            irc, itext, _ = _run(import_command(ncu, report), max(5.0, deadline - time.perf_counter()))
            if irc == 0 and '"ID"' in itext:
                text = itext
                csv_path = out_dir / f"{name}.csv"
                csv_path.write_text(itext)
        except OSError:
            pass
    try:
        result = profile_from_text(text, repeat=repeat, command=cmd, report_path=str(report) if report.exists() else None,
                                   csv_path=str(csv_path) if csv_path else None, **fields)
    except NcuParseError:
        return unavailable(classify_failure(output, rc), command=cmd,
                           report_path=str(report) if report.exists() else None)
    if rc not in (0, None) and result.available:
        result.reason = "the target exited with code %s after profiling: %s" % (rc, _last_error(output))
    elif not result.available and result.reason:
        warn_once(result.reason)
    result.seconds = time.perf_counter() - t0
    return result


def worker_command(request_path: Path, python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", "cuda_llm.tools.harness.gpu_worker", "run-once", "--request", str(request_path)]


def _worker_env(device: str | None = None) -> dict[str, str]:
    """The worker must import this package even when it runs from a checkout that is not installed; with a
    ``device`` (as CUDA_VISIBLE_DEVICES names it) it sees that GPU only, the one whose lock is held."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = device
    return env


def profile_candidate(loaded, so_path: str, *, sizes: dict | None = None, out_dir: Path, timeout_s: float | None = None,
                      seed: int = 0, repeat: int | None = None, ncu_path: str | None = None,
                      sections: Sequence[str] | None = None, options: ProfileOptions | None = None,
                      gpu: int | None = None) -> ProfileResult:
    """Profile one compiled candidate at ``sizes`` (default: the task's benchmark shape) in the GPU worker,
    on the ``gpu``-th visible device (default the first), holding that device's lock.

    ``loaded`` is a LoadedTask. Explicit arguments win over ``options``. Never raises: trouble gives
    ``available=False`` and a ``reason``.
    """
    opts = options or ProfileOptions()
    task = loaded.task
    sizes = dict(sizes or task.benchmark)
    repeat = max(1, repeat if repeat is not None else opts.repeat)
    if sections is None:
        sections = DEFAULT_SECTIONS + ((SOURCE_COUNTERS,) if opts.source_counters else ())
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        request = out_dir / "profile_request.json"
        request.write_text(json.dumps({"so_path": str(Path(so_path).resolve()), "task_folder": str(task.folder),
                                       "sizes": sizes, "seed": seed, "repeat": repeat}, indent=2))
    except OSError as exc:
        reason = f"cannot write the profile request in {out_dir}: {exc}"
        warn_once(reason)
        return ProfileResult(available=False, reason=reason, sizes=sizes)

    try:
        device = pinned_device(gpu)
    except ValueError as exc:
        return ProfileResult(available=False, reason=str(exc), sizes=sizes)
    kw = dict(out_dir=out_dir, timeout_s=timeout_s if timeout_s is not None else opts.timeout_s, ncu_path=ncu_path,
              sections=sections, repeat=repeat, env=_worker_env(device), sizes=sizes, max_launches=opts.max_launches)
    if find_ncu(ncu_path) is None:
        return profile_command(worker_command(request), **kw)       # says why, without waiting for the GPU

    with device_lock(device):
        return profile_command(worker_command(request), **kw)
