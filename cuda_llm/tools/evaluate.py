"""Evaluate one candidate: static check -> compile -> (GPU worker) validate, time, validate again.

Never raises for a bad kernel: every failure becomes an EvalResult with a status and a message that a
person or an LLM can act on. Held-out shapes are named in the stored case results but never in the
message, because messages go into prompts.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from cuda_llm.paths import cache_dir
from cuda_llm.tasks.loader import LoadedTask
from cuda_llm.tools import failure_text, speed_of_light, timing_stats
from cuda_llm.tools.device_probe import has_cuda_device
from cuda_llm.results import DeviceInfo, EvalResult, Status


class EvalOptions(BaseModel):
    arch: str | None = None
    timeout_s: float = 120.0
    time_budget_s: float = 10.0
    min_reps: int = 10
    min_time_s: float = 0.3          # sample at least this long (a stable median for short kernels)
    max_reps: int = 500
    rse_target: float = 0.01
    seed: int | None = None
    held_out: bool = True
    timing: bool = True
    allow_libraries: bool = False
    timing_repeats: int = 1        # >1: time the same data again, for the spread of the median (benchmarks)


NO_DEVICE_MESSAGE = ("compiled and passed the static checks; testing and timing need a CUDA device, and the "
                     "driver reports none here. Run this on a machine with an NVIDIA GPU (and pip install -e '.[gpu]').")


def _device_info_or_none() -> DeviceInfo | None:
    try:
        from cuda_llm.tools.device_info import get_device_info
        return get_device_info()
    except Exception:  # peaks are a refinement: without them there is no speed-of-light check
        return None


def evaluate_candidate(loaded: LoadedTask, source: str, *, candidate: str = "candidate",
                       options: EvalOptions | None = None, work_dir: Path | None = None,
                       baseline_ms: float | None = None) -> EvalResult:
    """The verdict on one candidate (see module doc)."""
    from cuda_llm.tools.compile import compile_source, source_hash
    from cuda_llm.tools.static_check import check_source

    opts = options or EvalOptions()
    task = loaded.task
    t0 = time.perf_counter()
    res = EvalResult(task=task.name, candidate=candidate, source_hash=source_hash(source), status=Status.ok,
                     baseline_ms=baseline_ms)

    def done(status: Status, message: str) -> EvalResult:
        res.status, res.message = status, message
        res.seconds = time.perf_counter() - t0
        return res

    issues = check_source(source, task, allow_libraries=opts.allow_libraries)
    res.static_issues = issues
    if issues:
        lines = "; ".join(f"[{i.rule}] {i.message}" + (f" (line {i.line})" if i.line else "") for i in issues[:5])
        return done(Status.static_error, f"refused before compiling: {lines}")
    libs = tuple(task.library_links) if opts.allow_libraries else ()
    comp = compile_source(source, arch=opts.arch, libs=libs)
    res.compile = comp
    res.source_hash = comp.source_hash or res.source_hash
    if not comp.ok:
        return done(Status.compile_error, "compilation failed: " + (comp.errors or "see the compile log"))
    if not has_cuda_device():
        return done(Status.no_device, NO_DEVICE_MESSAGE)
    return _run_on_device(loaded, source, comp.so_path or "", opts, work_dir, res, done)


def _run_on_device(loaded, source, so_path, opts, work_dir, res, done) -> EvalResult:
    from cuda_llm.tools.runner import run_worker
    from cuda_llm.tools.worker_protocol import EvaluateRequest, EvaluateResponse

    task = loaded.task
    device = _device_info_or_none()
    res.device = device.name if device else None
    seed = opts.seed if opts.seed is not None else int.from_bytes(res.source_hash.encode()[:4], "little") ^ int(time.time())
    req = EvaluateRequest(so_path=so_path, task_folder=str(task.folder), seed=seed & 0x7FFFFFFF, held_out=opts.held_out,
                          timing=opts.timing, time_budget_s=opts.time_budget_s, min_reps=opts.min_reps,
                          min_time_s=opts.min_time_s,
                          max_reps=opts.max_reps, rse_target=opts.rse_target, cache_dir=str(cache_dir()),
                          timing_repeats=opts.timing_repeats)
    tmp = None
    if work_dir is None:
        evals = cache_dir() / "evals"          # beside the builds, not in a small /tmp
        evals.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.TemporaryDirectory(prefix="eval-", dir=evals)
        work = Path(tmp.name)
    else:
        work = Path(work_dir)
        work.mkdir(parents=True, exist_ok=True)
    try:
        req_path, res_path = work / "eval_request.json", work / "eval_result.json"
        res_path.unlink(missing_ok=True)
        req_path.write_text(req.model_dump_json(indent=1))
        out = run_worker(["evaluate", "--request", str(req_path), "--result", str(res_path)], timeout_s=opts.timeout_s)
        (work / "worker_stderr.log").write_text(out.stderr)
        if out.timed_out:
            where = out.last_progress() or "before the first case"
            return done(Status.timeout, f"killed after {opts.timeout_s:g} s without finishing (last step: {where}). "
                                        f"A kernel that never ends: check loop bounds and barriers that not every "
                                        f"thread reaches. The next evaluation starts a fresh process.")
        resp = None
        if res_path.exists():         # written even after a CUDA fault (exit code 3) or a harness failure (4)
            try:
                resp = EvaluateResponse.model_validate_json(res_path.read_text())
            except ValueError:
                resp = None
        if resp is None:
            tail = out.stderr_tail(8)
            sig = f" (killed by signal {-out.rc})" if out.rc is not None and out.rc < 0 else ""
            return done(Status.runtime_error, f"the GPU worker crashed{sig}, exit code {out.rc}: {tail}")
        if resp.harness_error:
            return done(Status.runtime_error, f"internal harness error, not caused by the kernel: "
                                              f"{resp.harness_error}. Check the task's reference and inputs.")
    finally:
        if tmp is not None:
            tmp.cleanup()
    res.validation, res.timing, res.revalidation = resp.validation, resp.timing, resp.revalidation
    res.device = resp.device or res.device
    n_shown = len(task.shapes)
    passed = failure_text.passed_text(n_shown, opts.held_out and bool(task.held_out))
    if resp.error is not None and resp.error.stage == "validation":
        return done(resp.error.status, resp.error.message)
    if resp.validation is not None and not resp.validation.passed:
        return done(Status.wrong_answer, failure_text.validation_failure(resp.validation, "correctness"))
    if resp.error is not None:
        return done(resp.error.status, f"{passed}, then: {resp.error.message}")
    if resp.revalidation is not None and not resp.revalidation.passed:
        return done(Status.wrong_answer, failure_text.validation_failure(resp.revalidation, "fresh inputs after timing"))
    t = resp.timing
    if t is None:
        return done(Status.ok, f"{passed} (not timed)")
    sol = speed_of_light.sol_ms(task, t.sizes, device, tensor_cores=speed_of_light.uses_tensor_cores(source))
    t.sol_ms, t.pct_of_sol = sol, speed_of_light.pct_of_sol(sol, t.median_ms)
    reasons = []
    if speed_of_light.below_sol(t.median_ms, sol):
        reasons.append(f"median {t.median_ms:.4g} ms is below the speed-of-light bound {sol:.4g} ms "
                       f"(bytes over peak bandwidth, flops over peak rate): work was skipped or hidden from the timer")
    if timing_stats.hidden_work(t.median_ms, resp.hidden_median_ms):
        reasons.append(f"the device stayed busy {resp.hidden_median_ms:.4g} ms after solve()'s timed work ended "
                       f"(event median {t.median_ms:.4g} ms): work on a non-blocking stream that solve() did not wait for")
    headline = f"{passed}; median {t.median_ms:.4g} ms"
    if res.speedup is not None:
        headline += f" ({res.speedup:.2f}x the naive baseline)"
    if t.pct_of_sol is not None:
        headline += f", {t.pct_of_sol:.0f}% of speed of light"
    if reasons:
        t.suspect, t.suspect_reason = True, "; ".join(reasons)
        return done(Status.suspect, f"{headline}; timing not trusted: {t.suspect_reason}")
    return done(Status.ok, headline)


def _baseline_path(loaded: LoadedTask, which: str, source: str, device: str) -> Path:
    from cuda_llm.tools.compile import source_hash
    toml = (Path(loaded.task.folder) / "task.toml").read_text() if loaded.task.folder else ""
    key = source_hash(source, toml, which)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", device).strip("-").lower()
    return cache_dir() / "baselines" / f"{loaded.task.name}-{which}-{key}-{slug}.json"


def baseline_result(loaded: LoadedTask, which: str = "naive", options: EvalOptions | None = None) -> EvalResult | None:
    """The naive (or library) baseline's verdict, cached per device and source; None if there is no such file.
    For a PyTorch task: PyTorch eager (naive) and torch.compile (library), timed by tools/torch_timer.py."""
    if which not in ("naive", "library"):
        raise ValueError(f"which must be 'naive' or 'library', not {which!r}")
    if loaded.task.torch is not None:      # a PyTorch module: eager is speedup 1.0, torch.compile the yardstick
        from cuda_llm.tools.torch_baseline import torch_baseline

        return torch_baseline(loaded, "eager" if which == "naive" else "compile", options)
    path = loaded.task.baseline_path if which == "naive" else loaded.task.library_path
    if path is None or not path.exists():
        return None
    source = path.read_text()
    opts = (options or EvalOptions()).model_copy(update={"allow_libraries": which == "library"})
    device = _device_info_or_none()
    cache = _baseline_path(loaded, which, source, device.name) if device else None
    if cache is not None and cache.exists():
        try:
            return EvalResult.model_validate_json(cache.read_text())
        except ValueError:
            pass
    result = evaluate_candidate(loaded, source, candidate=which, options=opts)
    if cache is not None and result.status.passed and result.timing is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(result.model_dump(mode="json"), indent=1))
    return result
