"""Evaluate one candidate: static check -> compile -> on the device: validate, time, validate again -> verdict.

Never raises for a bad kernel: every failure becomes an EvalResult with a status and a message that a
person or an LLM can act on. The candidate runs only in the GPU worker; the comparisons with the reference
and the verdict happen here and in judge.py, in a process that never loads candidate code. Failure text
comes from failure_text.py, which never names a held-out shape.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path


from cuda_llm.figures import fmt_ms, fmt_pct
from cuda_llm.paths import cache_dir
from cuda_llm.tasks.loader import LoadedTask
from cuda_llm import cache_store
from cuda_llm.tools.harness import failure_text, timing_stats
from cuda_llm.tools.bounds import speed_of_light
from cuda_llm.tools.harness.eval_options import EvalOptions
from cuda_llm.tools.device.device_probe import has_cuda_device
from cuda_llm.results import CompileResult, DeviceInfo, EvalResult, Status
from cuda_llm.tools.harness.worker_protocol import EvaluateResponse
from cuda_llm.tools.compiler.compile import compile_source, safe_filename, source_hash
from cuda_llm.tools.compiler.static_check import check_source
from cuda_llm.tools.compiler.symbols import check_build
from cuda_llm.tools.harness.device_info import get_device_info
from cuda_llm.tools.harness.judge import judge
from cuda_llm.tools.harness.torch_baseline import torch_baseline


NO_DEVICE_MESSAGE = ("compiled and passed the static checks; testing and timing need a CUDA device, and the "
                     "driver reports none here. Run this on a machine with an NVIDIA GPU (and pip install -e '.[gpu]').")
CAP_EVERY_S = 60.0               # the cache cap is enforced after an evaluation at most this often
_last_cap = 0.0


def _device_info_or_none(gpu: int | None = None) -> DeviceInfo | None:
    try:
        return get_device_info(gpu=gpu)
    except Exception:  # peaks are a refinement: without them there is no speed-of-light check
        return None


def evaluate_candidate(loaded: LoadedTask, source: str, *, candidate: str = "candidate",
                       options: EvalOptions | None = None, work_dir: Path | None = None,
                       baseline_ms: float | None = None) -> EvalResult:
    """The verdict on one candidate (see module doc)."""
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
    comp = compile_source(source, arch=opts.arch, libs=libs, filename=safe_filename(candidate))
    res.compile = comp
    res.source_hash = comp.source_hash or res.source_hash
    if not comp.ok:
        return done(Status.compile_error, "compilation failed: " + (comp.errors or "see the compile log"))
    after = check_build(comp, allow_libraries=opts.allow_libraries)   # preprocessed source, symbols, library kernels
    if after:
        res.static_issues = after
        lines = "; ".join(f"[{i.rule}] {i.message}" + (f" (line {i.line})" if i.line else "") for i in after[:5])
        return done(Status.static_error, f"refused after compiling: {lines}")
    if not has_cuda_device():
        return done(Status.no_device, NO_DEVICE_MESSAGE)
    out = run_compiled(loaded, comp.so_path or "", source=source, options=opts, work_dir=work_dir,
                       candidate=candidate, baseline_ms=baseline_ms, compile=comp)
    out.static_issues, out.compile, out.source_hash = res.static_issues, comp, res.source_hash
    out.seconds = time.perf_counter() - t0
    return out


def run_compiled(loaded: LoadedTask, so_path: str, *, source: str, options: EvalOptions | None = None,
                 work_dir: Path | None = None, candidate: str = "candidate", baseline_ms: float | None = None,
                 worker_argv: list[str] | None = None, compile: CompileResult | None = None) -> EvalResult:
    """Test, time and judge a candidate already compiled to ``so_path`` (static checks and compile are the
    caller's: tests that reach the runtime on purpose use this). ``compile`` (the build's result) tells the
    speed-of-light bound which units the machine code uses (its SASS); without it the bound takes the
    fastest units the task's data type could use. The work folder keeps eval_result.json and the worker's logs."""
    opts = options or EvalOptions()
    t0 = time.perf_counter()
    res = EvalResult(task=loaded.task.name, candidate=candidate, source_hash=source_hash(source), status=Status.ok,
                     baseline_ms=baseline_ms, compile=compile)
    device = _device_info_or_none(opts.gpu)
    res.device = device.name if device else None
    opts = with_call_limit(loaded, opts, device)
    seed = opts.seed if opts.seed is not None else int.from_bytes(res.source_hash.encode()[:4], "little") ^ int(time.time())
    tmp = None
    if work_dir is None:
        evals = cache_dir() / "evals"          # beside the builds, not in a small /tmp
        evals.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.TemporaryDirectory(prefix="eval-", dir=evals)
        work = Path(tmp.name)
    else:
        work = Path(work_dir).resolve()      # the worker runs in a fresh folder of its own: no relative paths
        work.mkdir(parents=True, exist_ok=True)
    build = Path(so_path).resolve().parent
    cached_build = (cache_dir() / "builds").resolve() in build.parents
    try:
        with (cache_store.in_use(build) if cached_build else _nothing()), \
                (cache_store.in_use(work) if tmp is not None else _nothing()):
            out = _judged(loaded, so_path, source, opts, seed & 0x7FFFFFFF, work, worker_argv, res, device)
    finally:
        if tmp is not None:
            tmp.cleanup()
        _enforce_cap()
    out.seconds = time.perf_counter() - t0
    return out


def with_call_limit(loaded: LoadedTask, opts: EvalOptions, device: DeviceInfo | None) -> EvalOptions:
    """``opts`` with the limit of one call of solve() in its budget (timing_budget.call_limit_s) where the naive
    kernel's time is known: given in ``opts.budget.naive_ms``, else the naive baseline's cached verdict on this
    device (the run's setup measures it first, so every candidate of a run, on every GPU of the pool, gets the
    limit). A limit the caller set stays as it is."""
    budget = opts.budget
    if budget.call_limit_s is not None:
        return opts
    naive = budget.naive_ms if budget.naive_ms is not None else cached_naive_ms(loaded, device)
    limited = budget.with_naive(naive)
    return opts if limited is budget else opts.model_copy(update={"budget": limited})


def cached_naive_ms(loaded: LoadedTask, device: DeviceInfo | None) -> float | None:
    """The naive baseline's median at the benchmark shape from its cached verdict on this device (None: not
    measured yet here, or a PyTorch task whose baseline is not a kernel)."""
    path = loaded.task.baseline_path
    if device is None or loaded.task.torch is not None or path is None or not Path(path).exists():
        return None
    cache = _baseline_path(loaded, "naive", Path(path).read_text(), device.name)
    try:
        got = EvalResult.model_validate_json(cache.read_text())
    except (OSError, ValueError):
        return None
    return got.timing.median_ms if got.status.passed and got.timing is not None else None


def _judged(loaded: LoadedTask, so_path: str, source: str, opts: EvalOptions, seed: int, work: Path,
            worker_argv: list[str] | None, res: EvalResult, device: DeviceInfo | None) -> EvalResult:
    """Judge, and judge again (fresh inputs, another schedule) when the clock check alone doubted the
    timing: on a host busy with other work (parallel compiles, another evaluation) the parent's clock is
    noisy and an honest kernel can land outside its margin once, where times that were forged disagree
    every time. Every attempt is judged whole; the last one is the verdict, and it says it was retimed."""
    retimed = None
    for attempt in range(opts.budget.clock_retries + 1):
        if attempt:
            (work / "eval_result.json").replace(work / f"eval_result-attempt{attempt}.json")
        resp = judge(loaded, so_path, opts, (seed + 7919 * attempt) & 0x7FFFFFFF, work, worker_argv)
        (work / "eval_result.json").write_text(resp.model_dump_json(indent=1))
        out = verdict(loaded, source, opts, resp, res.model_copy(deep=True), device)
        if out.timing is not None and retimed:
            out.timing.retimed_because = retimed
            out.message += f" (timed {attempt + 1} times: {retimed})"
        if out.timing is None or out.timing.doubts != ["clock"]:
            break
        retimed = f"timing {attempt + 1} disagreed with the judge's clock ({'; '.join(resp.clock.issues)})"
    return out


class _nothing:
    def __enter__(self) -> bool:
        return True

    def __exit__(self, *exc: object) -> None:
        return None


def _enforce_cap() -> None:
    """Keep the whole cache under its cap; at most once a minute per process (a scan costs milliseconds)."""
    global _last_cap
    now = time.monotonic()
    if now - _last_cap < CAP_EVERY_S:
        return
    _last_cap = now
    try:
        cache_store.enforce_cap()
    except (OSError, cache_store.CacheConfigError):
        pass


def verdict(loaded: LoadedTask, source: str, opts: EvalOptions, resp: EvaluateResponse, res: EvalResult,
            device: DeviceInfo | None) -> EvalResult:
    """The status and the message from what the judge found (pure: no device, no files)."""
    task = loaded.task

    def done(status: Status, message: str) -> EvalResult:
        res.status, res.message = status, message
        return res

    res.validation, res.timing, res.revalidation = resp.validation, resp.timing, resp.revalidation
    res.device = resp.device or res.device
    if resp.harness_error:
        return done(Status.runtime_error, f"internal harness error, not caused by the kernel: "
                                          f"{resp.harness_error}. Check the task's reference and inputs.")
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
    b = speed_of_light.bound(task, t.sizes, device, sass=res.compile.sass if res.compile else None,
                             library=opts.allow_libraries)
    sol = b.ms if b is not None else None
    t.sol_ms, t.pct_of_sol = sol, speed_of_light.pct_of_sol(sol, t.median_ms)
    t.sol_basis = b.basis if b is not None else None
    reasons, t.doubts = [], []
    if speed_of_light.below_sol(t.median_ms, sol):
        t.doubts.append("speed_of_light")
        reasons.append(f"median {t.median_ms:.4g} ms is below the speed-of-light bound {sol:.4g} ms "
                       f"(bytes over peak bandwidth, flops over peak rate): work was skipped or hidden from the timer")
    if timing_stats.hidden_work(t.median_ms, resp.hidden_median_ms):
        t.doubts.append("hidden_work")
        reasons.append(f"the device stayed busy {resp.hidden_median_ms:.4g} ms after solve()'s timed work ended "
                       f"(event median {t.median_ms:.4g} ms): work on a non-blocking stream that solve() did not wait for")
    if resp.clock is not None and resp.clock.issues:
        t.doubts.append("clock")
        reasons.append("the times do not agree with the judge's clock: " + "; ".join(resp.clock.issues))
    headline = f"{passed}; median {fmt_ms(t.median_ms)} ms"
    if res.speedup is not None:
        headline += f" ({res.speedup:.2f}x the naive baseline)"
    if t.pct_of_sol is not None:
        headline += f", {fmt_pct(t.pct_of_sol)}% of speed of light"
    if reasons:
        t.suspect, t.suspect_reason = True, "; ".join(reasons)
        return done(Status.suspect, f"{headline}; timing not trusted: {t.suspect_reason}")
    return done(Status.ok, headline)


def _baseline_path(loaded: LoadedTask, which: str, source: str, device: str) -> Path:
    toml = (Path(loaded.task.folder) / "task.toml").read_text() if loaded.task.folder else ""
    key = source_hash(source, toml, which)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", device).strip("-").lower()
    return cache_dir() / "baselines" / f"{loaded.task.name}-{which}-{key}-{slug}.json"


def baseline_result(loaded: LoadedTask, which: str = "naive", options: EvalOptions | None = None) -> EvalResult | None:
    """The naive (or library) baseline's verdict, cached per device and source; None if there is no such file.
    For a PyTorch task: PyTorch eager (naive) and torch.compile (library), timed by tools/harness/torch_timer.py."""
    if which not in ("naive", "library"):
        raise ValueError(f"which must be 'naive' or 'library', not {which!r}")
    if loaded.task.torch is not None:      # a PyTorch module: eager is speedup 1.0, torch.compile the yardstick

        return torch_baseline(loaded, "eager" if which == "naive" else "compile", options)
    path = loaded.task.baseline_path if which == "naive" else loaded.task.library_path
    if path is None or not path.exists():
        return None
    source = path.read_text()
    opts = (options or EvalOptions()).model_copy(update={"allow_libraries": which == "library"})
    device = _device_info_or_none(opts.gpu)
    cache = _baseline_path(loaded, which, source, device.name) if device else None
    if cache is not None and cache.exists():
        try:
            got = EvalResult.model_validate_json(cache.read_text())
            cache_store.touch(cache)           # used now: last in line for eviction
            return got
        except ValueError:
            pass
    result = evaluate_candidate(loaded, source, candidate=which, options=opts)
    if cache is not None and result.status.passed and result.timing is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(result.model_dump(mode="json"), indent=1))
    return result
