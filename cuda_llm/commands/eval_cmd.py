"""`cuda-llm eval TASK KERNEL.cu`: compile, test and time one kernel, as the optimization loop would."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HELP = "compile, test and time one CUDA kernel against a task"
DESCRIPTION = """Evaluate one candidate file for a task: static checks, nvcc, every correctness shape
(held-out ones included) on fresh random inputs, then event timing at the benchmark shape with an L2 flush
before every call, and the same checks again on fresh inputs.

Prints: compiled, tests passed, median latency, speedup over the task's naive baseline, ratio to the
library baseline (with --library, where the task has one) and % of speed of light.

Exit codes: 0 passed; 1 failed (static, compile, wrong answer, crash, timeout) or suspect timing;
2 no CUDA device here (the kernel was still compiled and checked statically) or bad usage."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", help="task name (see 'cuda-llm tasks') or a task folder")
    p.add_argument("kernel", type=Path, help="CUDA source defining the task's entry point")
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    p.add_argument("--arch", help="target architecture, e.g. sm_90 (default: the device's, else $CUDA_LLM_ARCH, else sm_90)")
    p.add_argument("--library", action="store_true", help="also time the task's library baseline (e.g. cuBLAS) and show the ratio")
    p.add_argument("--allow-libraries", action="store_true", help="let the kernel call cuBLAS/cuDNN/thrust (not a fair candidate)")
    p.add_argument("--time-budget", type=float, default=10.0, help="seconds of timing at most (default 10)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds before a hung evaluation is killed (default 120)")
    p.add_argument("--seed", type=int, help="seed of the random inputs (default: fresh)")


def _progress(msg: str) -> None:
    print(f"cuda-llm eval: {msg}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from cuda_llm.commands.table import render_table
    from cuda_llm.tasks import TaskError, load_task
    from cuda_llm.tools.compile import CompileSetupError
    from cuda_llm.tools.evaluate import EvalOptions, baseline_result, evaluate_candidate
    from cuda_llm.tools.results import Status

    try:
        loaded = load_task(args.task)
    except TaskError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.kernel.is_file():
        print(f"error: {args.kernel}: no such file; pass the path of a .cu file that defines {loaded.task.signature}",
              file=sys.stderr)
        return 2
    source = args.kernel.read_text()
    opts = EvalOptions(arch=args.arch, time_budget_s=args.time_budget, timeout_s=args.timeout, seed=args.seed,
                       allow_libraries=args.allow_libraries)
    try:
        base = lib = None
        _progress(f"evaluating {args.kernel} for task {loaded.name}")
        result = evaluate_candidate(loaded, source, candidate=args.kernel.name, options=opts)
        if result.status not in (Status.static_error, Status.compile_error, Status.no_device):
            _progress("naive baseline (cached after the first time)")
            base = baseline_result(loaded, "naive", opts.model_copy(update={"allow_libraries": False}))
            if base is not None and base.timing is not None:
                result.baseline_ms = base.timing.median_ms
            if args.library:
                _progress("library baseline")
                lib = baseline_result(loaded, "library", opts)
    except CompileSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    lib_ms = lib.timing.median_ms if lib is not None and lib.timing is not None else None
    if args.json:
        out = result.model_dump(mode="json")
        out["speedup"] = result.speedup
        out["library_ms"] = lib_ms
        print(json.dumps(out, indent=2))
    else:
        print(render_table(["check", "result"], _rows(result, lib_ms, args.library and loaded.task.library_path is not None), align="ll"))
        print()
        print(result.message)
    if result.status == Status.no_device:
        print("Testing needs a CUDA device: none here. The kernel compiled and passed the static checks.",
              file=sys.stderr)
        return 2
    return 0 if result.status == Status.ok else 1


def _rows(r, lib_ms, want_lib: bool) -> list[list[str]]:
    comp = r.compile
    compiled = "-" if comp is None else ("yes" if comp.ok else "no")
    if comp is not None and comp.ok and comp.kernels:
        k = comp.kernels[0]
        compiled += f" ({comp.arch}; {k.name}: {k.registers} regs, {k.shared_bytes} B smem" + (", spills" if k.spills else "") + ")"
    tests = "-"
    if r.validation is not None:
        total = len(r.validation.cases) if r.validation.passed else None
        tests = f"{r.validation.n_passed}/{total if total is not None else '?'}" + (" passed" if r.validation.passed else " (stopped at first failure)")
        if r.revalidation is not None:
            tests += f"; after timing {r.revalidation.n_passed}/{len(r.revalidation.cases)}"
    t = r.timing
    rows = [["task", r.task], ["status", r.status.value], ["compiled", compiled], ["tests passed", tests]]
    rows.append(["median latency", f"{t.median_ms:.4g} ms (min {t.min_ms:.4g}, IQR {t.iqr_ms:.3g}, {t.repetitions} reps, RSE {100 * t.rse:.2f}%)" if t else "-"])
    rows.append(["speedup vs naive", f"{r.speedup:.2f}x (naive {r.baseline_ms:.4g} ms)" if r.speedup else "-"])
    if want_lib:
        rows.append(["vs library", f"{lib_ms / t.median_ms:.2f}x (library {lib_ms:.4g} ms)" if (t and lib_ms) else "-"])
    rows.append(["% speed of light", f"{t.pct_of_sol:.1f}% (bound {t.sol_ms:.4g} ms)" if t and t.pct_of_sol is not None else "-"])
    if r.device:
        rows.append(["device", r.device])
    return rows
