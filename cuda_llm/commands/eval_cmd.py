"""`cuda-llm eval TASK KERNEL.cu`: judge one candidate the way the optimization loop does.

Static checks, nvcc, every correctness shape (held-out ones included), event timing at the benchmark
shape, correctness again after timing; then the speedup over the task's naive baseline, the ratio to
its library baseline where it has one, and the fraction of the speed-of-light bound.
Exit codes: 0 the kernel passed and its timing is trusted; 1 it failed (or its timing is suspect);
2 bad usage, or no CUDA device to test on (it was still compiled and checked statically).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cuda_llm.commands import one_line_errors
from cuda_llm.commands.flags import parse_duration, timing_budget
from cuda_llm.report.formats import render_table
from cuda_llm.results import NAIVE_BASELINE
from cuda_llm.tools.harness import failure_text

HELP = "compile, test and time one kernel for a task (the harness verdict)"
DESCRIPTION = """Evaluate KERNEL.cu for TASK exactly as the optimization loop does:

  1. static checks: the entry point has the task's exact signature; no library does the work
     (cuBLAS, cuDNN, thrust, device-wide CUB); no host tricks (system, fork, sleep, files)
  2. nvcc for the GPU's architecture (or --arch): registers, shared memory and spills per kernel
  3. every correctness shape with fresh random inputs, poisoned outputs and a check that inputs are
     unchanged; held-out shapes (never shown to the LLM) included
  4. event timing at the benchmark shape (L2 flushed before every call, until the relative standard
     error is 1% or the time budget is spent), then correctness again on fresh inputs
  5. speedup over the naive baseline, ratio to the library baseline (where the task has one) and the
     percentage of the speed-of-light bound; faster than that bound is 'suspect', never a win

Without a CUDA device it stops after step 2 and exits with code 2.
Exit codes: 0 passed; 1 failed or suspect; 2 bad usage or no device.

Examples:
  cuda-llm eval gelu my_gelu.cu
  cuda-llm eval softmax softmax_v3.cu --json > result.json
  cuda-llm eval sgemm gemm.cu --arch sm_90 --eval-time 5
  cuda-llm eval sgemm cuda_llm/tasks/suite/sgemm/library.cu --library   # measure a library yardstick"""

_ADVICE: dict[str, str] = {
    "static_error": "Fix the issues above and run again; the entry point must be exactly: {signature}",
    "compile_error": "Fix the first compiler error above (line numbers refer to your file) and run again.",
    "wrong_answer": (
        "The output differs from the NumPy reference at the shape shown. Check the bounds for sizes that are "
        "not multiples of your block size, that every output element is written, that inputs are not "
        "written, and that the result does not depend on which shapes you have seen."
    ),
    "runtime_error": (
        "A CUDA error stopped the kernel (often an out-of-bounds access or a bad launch configuration). "
        "Run your own driver under compute-sanitizer to find the access."
    ),
    "timeout": (
        "The evaluation did not finish within the time limit (--timeout). Look for a loop that never ends "
        "or a __syncthreads() that not every thread of the block reaches."
    ),
    "suspect": (
        "The kernel passed the tests but its timing cannot be trusted (faster than the speed of light, or "
        "work left running after solve() returned). Do all work on the default stream and do not skip work "
        "that the timer would miss."
    ),
    "no_device": (
        "Testing needs a CUDA device: none was found here. The kernel compiled and passed the static "
        "checks; run the same command on a machine with an NVIDIA GPU and driver to test and time it."
    ),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("task", help="task name (see `cuda-llm tasks`) or a task folder")
    p.add_argument("kernel", type=Path, help="the CUDA source file defining the task's entry point")
    p.add_argument("--json", action="store_true", help="print the full result (and the baselines) as JSON")
    p.add_argument("--arch", help="GPU architecture for nvcc, e.g. sm_90 (default: the local GPU, else sm_90)")
    p.add_argument("--library", "--allow-libraries", dest="library", action="store_true",
                   help="allow library calls (cuBLAS, CUB) and link the task's libraries: for yardsticks only")
    p.add_argument("--eval-time", dest="eval_time", type=parse_duration, default=10.0, metavar="DURATION",
                   help="timing repetitions at most, e.g. 10s (default 10s)")
    p.add_argument("--timeout", type=parse_duration, default=120.0, metavar="DURATION",
                   help="time before a hanging evaluation is killed (default 120s)")
    p.add_argument("--seed", type=int, default=None, help="seed of the random inputs (default: fresh)")
    p.add_argument("--no-held-out", action="store_true", help="skip the held-out shapes (faster, weaker)")
    p.add_argument("--no-baselines", action="store_true",
                   help="do not measure the naive and library baselines (no speedup shown)")
    p.add_argument("--tasks-dir", type=Path, action="append", default=[], help="extra folder of tasks")


def _err(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)


def _progress(msg: str) -> None:
    print(f"[eval] {msg}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    # the task loader, the compiler and the judge are imported here, not at the top: `--help` would load them
    # (NumPy among them) for nothing
    from cuda_llm.commands.task_kernel import ArgumentProblem, load_task_argument, read_kernel_argument

    kernel: Path = args.kernel
    try:
        loaded = load_task_argument(args.task, args.tasks_dir)
        source = read_kernel_argument(kernel, loaded)
    except ArgumentProblem as exc:
        _err(str(exc))
        return 2

    from cuda_llm.tools.compiler.compile import CompileSetupError, resolve_arch
    from cuda_llm.tools.harness.evaluate import EvalOptions, baseline_result, evaluate_candidate

    try:
        arch = resolve_arch(args.arch)
    except (ValueError, CompileSetupError) as exc:
        _err(str(exc))
        return 2
    options = EvalOptions(
        arch=arch, timeout_s=args.timeout, budget=timing_budget(args), seed=args.seed,
        held_out=not args.no_held_out, allow_libraries=args.library,
    )
    _progress(f"{loaded.name}: {kernel} for {arch}: static checks, compile, test, time ...")
    try:
        result = evaluate_candidate(loaded, source, candidate=kernel.name, options=options)
    except CompileSetupError as exc:
        _err(str(exc))
        return 2

    baselines: dict[str, Any] = {}
    if result.timing is not None and not args.no_baselines:
        base_opts = options.model_copy(update={"allow_libraries": False, "seed": None})
        _progress(f"{loaded.task.baseline_label} baseline (cached per device after the first time) ...")
        baselines["naive"] = _safe_baseline(baseline_result, loaded, "naive", base_opts)
        if loaded.task.has_library:
            _progress(f"{loaded.task.library_label} baseline (cached per device after the first time) ...")
            baselines["library"] = _safe_baseline(baseline_result, loaded, "library", base_opts)
        naive_ms = _median(baselines.get("naive"))
        if naive_ms is not None:
            result = result.model_copy(update={"baseline_ms": naive_ms})

    summary = summarize(result, baselines, loaded.task, held_out=not args.no_held_out)
    if args.json:
        payload = result.model_dump(mode="json")
        payload["speedup"] = summary["speedup"]
        payload["library_ratio"] = summary["library_ratio"]
        payload["library_ms"] = summary["library_ms"]
        payload["baselines"] = {k: (v.model_dump(mode="json") if v is not None else None) for k, v in baselines.items()}
        print(json.dumps(payload, indent=2))
    else:
        print(render_result(result, summary, loaded.task))
    status = result.status.value
    if status == "no_device":
        return 2
    return 0 if status == "ok" else 1


def _safe_baseline(fn: Any, loaded: Any, which: str, options: Any) -> Any:
    """A baseline that cannot be measured must not hide the candidate's own verdict."""
    try:
        return fn(loaded, which, options)
    except Exception as exc:  # noqa: BLE001 - reported, the candidate's result still prints
        _progress(f"{which} baseline could not be measured: {type(exc).__name__}: {exc}")
        return None


def _median(res: Any) -> float | None:
    if res is None or getattr(res, "timing", None) is None or not res.status.passed:
        return None
    return res.timing.median_ms


# ------------------------------------------------------------------------------------------ pure rendering
def summarize(result: Any, baselines: dict[str, Any], task: Any, *, held_out: bool = True) -> dict[str, Any]:
    """The headline numbers: speedup over naive (>1 faster), ratio to the library (>1 faster than it)."""
    median = result.timing.median_ms if result.timing is not None else None
    naive_ms = _median(baselines.get("naive"))
    lib_ms = _median(baselines.get("library"))
    ok = median is not None and median > 0
    return {
        "median_ms": median,
        "naive_ms": naive_ms,
        "library_ms": lib_ms,
        "speedup": naive_ms / median if ok and naive_ms else None,
        "library_ratio": lib_ms / median if ok and lib_ms else None,
        "has_library": task.has_library,
        "n_cases": sum(1 for _, held in task.all_cases() if held_out or not held),
    }


def _fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms * 1e3:.1f} us" if ms < 1 else f"{ms:.3f} ms"


def render_result(result: Any, summary: dict[str, Any], task: Any) -> str:
    """The console report: resources per kernel, then the verdict, then what to do on failure."""
    out: list[str] = []
    comp = result.compile
    if comp is not None and comp.ok and comp.kernels:
        rows = [[k.name, k.registers, k.shared_bytes, k.stack_bytes,
                 f"{k.spill_store_bytes}/{k.spill_load_bytes}" + ("  SPILLS" if k.spills else "")]
                for k in comp.kernels]
        out.append(render_table(["kernel", "registers", "smem B", "stack B", "spill st/ld B"], rows, align="lrrrl"))
        out.append("")
    kv: list[tuple[str, str]] = [("task", result.task), ("status", result.status.value)]
    if comp is not None:
        kv.append(("compiled", f"yes ({comp.arch}, {comp.seconds:.1f} s{', cached' if comp.cached else ''})"
                   if comp.ok else "no"))
    elif result.static_issues:
        kv.append(("compiled", "no (refused before compiling)"))
    val = result.validation
    if val is not None:
        total = max(summary.get("n_cases") or 0, len(val.cases))
        held = [c for c in val.cases if c.held_out]
        held_txt = f" ({sum(c.passed for c in held)}/{len(held)} held-out)" if held else ""
        stopped = " (stopped at the first failure)" if len(val.cases) < total else ""
        kv.append(("tests passed", f"{val.n_passed}/{total}{held_txt}{stopped}"))
    if result.revalidation is not None:
        rv = result.revalidation
        kv.append(("after timing", f"{rv.n_passed}/{len(rv.cases)} passed on fresh inputs"))
    t = result.timing
    if t is not None:
        kv.append(("benchmark shape", ", ".join(f"{k}={v}" for k, v in t.sizes.items())))
        kv.append(("median latency", f"{_fmt_ms(t.median_ms)} (min {_fmt_ms(t.min_ms)}, IQR {_fmt_ms(t.iqr_ms)}, "
                                     f"{t.repetitions} reps, rse {100 * t.rse:.2f}%, stop: {t.stop_reason})"))
        if summary["speedup"] is not None:
            base = getattr(task, "baseline_label", NAIVE_BASELINE)
            kv.append((f"speedup vs {base}", f"{summary['speedup']:.2f}x ({base} {_fmt_ms(summary['naive_ms'])})"))
        if summary["has_library"]:
            lib = getattr(task, "library_label", "library")
            if summary["library_ratio"] is not None:
                kv.append((f"vs {lib}", f"{summary['library_ratio']:.2f}x ({lib} {_fmt_ms(summary['library_ms'])}; "
                                        f">1 is faster than {'the library' if lib == 'library' else lib})"))
            else:
                kv.append((f"vs {lib}", f"- ({lib} baseline not measured)"))
        if t.pct_of_sol is not None:
            kv.append(("speed of light", f"{t.pct_of_sol:.1f}% (bound {_fmt_ms(t.sol_ms)})"))
            if t.sol_basis:
                kv.append(("bound", t.sol_basis))
        if t.suspect:
            kv.append(("suspect", t.suspect_reason or "timing cannot be trusted"))
    if result.device:
        kv.append(("device", result.device))
    kv.append(("seconds", f"{result.seconds:.1f}"))
    width = max(len(k) for k, _ in kv)
    out.extend(f"{k.ljust(width)}  {v}" for k, v in kv)

    status = result.status.value
    if status != "ok":
        out.append("")
        for issue in result.static_issues:
            where = f"line {issue.line}: " if issue.line else ""
            out.append(f"  [{issue.rule}] {where}{issue.message}")
        detail = _failure_detail(result)
        if detail:
            out.append(detail)
        advice = _ADVICE.get(status)
        if advice:
            if out[-1] != "":
                out.append("")
            out.append("what to do: " + advice.format(signature=task.signature))
    return "\n".join(out)


def _failure_detail(result: Any) -> str:
    """The condensed message: the harness's own, plus the compiler errors or the first failing case."""
    parts: list[str] = []
    if result.message and not result.static_issues and result.status.value != "no_device":
        parts.append(result.message.strip())
    comp = result.compile
    if comp is not None and not comp.ok and comp.errors and comp.errors.strip() not in result.message:
        parts.append(comp.errors.strip())
    for label, val in (("test", result.validation), ("after timing", result.revalidation)):
        first = val.first_failure() if val is not None else None
        if first is None:
            continue
        text = failure_text.case_failure(first)
        if text in "\n".join(parts) or (first.reason and not first.held_out and first.reason in "\n".join(parts)):
            break                        # the harness's message already names this case
        parts.append(f"first failing {label}: {text}")
        break
    return "\n".join(parts)
