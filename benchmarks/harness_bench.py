"""Harness benchmark (GPU machine): per task, the naive baseline's latency, the library baseline's where
there is one, % of speed of light, what one evaluation costs (compile, validation, timing, and the judge's
own checks: the parent's checker, the transport of raw outputs, the input sets written between timed
calls, the worker's start), the spread of the median over repeated timings, and the event time against
Nsight Compute's gpu__time_duration.sum. "eval s" is a second evaluation of the same kernel: compile
cached, benchmark data warm, as in an optimization run.

    python benchmarks/harness_bench.py [--tasks a,b] [--repeats 5] [--ncu-tasks gelu,softmax] [--out bench-out]

--tasks defaults to $TASKS (comma-separated), else all tasks. Writes OUT/harness.md (table) and
OUT/harness.json (every figure) after every task, so a run cut short still leaves its table. "naive/lib"
is the library baseline's speedup over the naive one (how much headroom a candidate has). Where cuBLAS is
only the pip wheel (no libcublas.so in the toolkit), the compiler finds it (cuda_llm/tools/compiler/libraries.py).
Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cuda_llm.report.harness_report import harness_markdown, harness_table  # noqa: E402
from cuda_llm.tasks import list_task_names, load_task  # noqa: E402
from cuda_llm.tools.compiler.compile import compile_source  # noqa: E402
from cuda_llm.tools.harness.device_info import get_device_info  # noqa: E402
from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate  # noqa: E402
from cuda_llm.tools.harness.timing_budget import TimingBudget  # noqa: E402
from cuda_llm.tools.harness.harness_stats import event_vs_ncu_pct, spread_pct, summarize  # noqa: E402
from cuda_llm.tools.compiler.libraries import library_flags  # noqa: E402
from cuda_llm.tools.harness.worker_protocol import EvaluateResponse  # noqa: E402

DEFAULT_NCU = "gelu,softmax,gemv,sgemm,hgemm,layernorm,reduce_sum,conv2d"


def log(msg: str) -> None:
    print(f"[harness-bench] {msg}", file=sys.stderr, flush=True)


def bench_task(name: str, args, work: Path) -> dict:
    loaded = load_task(name)
    task = loaded.task
    row: dict = {"task": name}
    src = task.baseline_path.read_text()
    t0 = time.perf_counter()
    comp = compile_source(src, cache=False)
    row["compile_s"] = time.perf_counter() - t0
    opts = EvalOptions(budget=TimingBudget(time_budget_s=args.time_budget), seed=1)
    repeated = opts.model_copy(update={"budget": opts.budget.model_copy(update={"timing_repeats": args.repeats})})
    t0 = time.perf_counter()
    warm = evaluate_candidate(loaded, src, candidate="naive", options=repeated,
                              work_dir=work / name / "eval")
    total = time.perf_counter() - t0
    resp = EvaluateResponse.model_validate_json((work / name / "eval" / "eval_result.json").read_text())
    t = warm.timing
    row.update(status=warm.status.value, message=warm.message)
    if t is None:
        return row
    t0 = time.perf_counter()
    again = evaluate_candidate(loaded, src, candidate="naive", options=opts, work_dir=work / name / "eval2")
    row["eval_s"] = time.perf_counter() - t0
    if again.status.value != warm.status.value:
        row["message"] = f"second evaluation: {again.status.value}: {again.message}"
    second = EvaluateResponse.model_validate_json((work / name / "eval2" / "eval_result.json").read_text())
    costs, clock = second.costs, second.clock
    row.update(check_s=costs.get("checker_s"), worker_start_s=costs.get("worker_start_s"),
               transport_s=costs.get("transport_write_s", 0.0) + costs.get("transport_read_s", 0.0),
               sets_s=costs.get("sets_upload_s"),
               parent_solve_ms=clock.parent_solve_ms if clock else None,
               clock_issues=clock.issues if clock else None)
    per_timing = t.seconds
    row.update(
        median_ms=t.median_ms, min_ms=t.min_ms, iqr_ms=t.iqr_ms, rse=t.rse, reps=t.repetitions,
        stop_reason=t.stop_reason, host_median_ms=t.host_median_ms, hidden_ms=resp.hidden_median_ms,
        sol_ms=t.sol_ms, pct_of_sol=t.pct_of_sol,
        validation_s=(warm.validation.seconds if warm.validation else None),
        timing_s=per_timing,
        revalidation_s=(warm.revalidation.seconds if warm.revalidation else None),
        first_eval_s=total,               # compile, making the benchmark data and the timing repeats included
        benchmark_data_s=resp.benchmark_data_s,
        repeat_medians_ms=resp.repeat_medians_ms,
    )
    spread = spread_pct(resp.repeat_medians_ms)
    if spread is not None:
        row["spread_pct"] = spread
    if task.library_path is not None:
        lib = evaluate_candidate(loaded, task.library_path.read_text(), candidate="library",
                                 options=opts.model_copy(update={"allow_libraries": True, "held_out": False}),
                                 work_dir=work / name / "library")
        row["library_status"] = lib.status.value
        if not lib.status.passed:
            row["library_message"] = lib.message
        if lib.timing is not None:
            row["library_ms"] = lib.timing.median_ms
            row["library_pct_of_sol"] = lib.timing.pct_of_sol
            if lib.timing.median_ms > 0:
                row["naive_over_library"] = t.median_ms / lib.timing.median_ms
    if name in args.ncu_tasks and comp.ok:
        try:
            from cuda_llm.tools.profile.ncu import profile_candidate
            prof = profile_candidate(loaded, comp.so_path, out_dir=work / name / "ncu", timeout_s=120,
                                     sections=("SpeedOfLight",))
            row["ncu_ms"] = prof.duration_ms if prof.available else None
            if not prof.available:
                row["ncu_reason"] = prof.reason
            elif prof.duration_ms:
                row["event_vs_ncu_pct"] = event_vs_ncu_pct(t.median_ms, prof.duration_ms)
        except Exception as exc:  # the profiler is optional here
            row["ncu_reason"] = f"{type(exc).__name__}: {exc}"
    return row


def write_reports(rows: list[dict], dev, args, t0: float) -> None:
    """harness.json (every figure) and harness.md (the table and the summary) in args.out."""
    summary = summarize(rows, dev, time.perf_counter() - t0)
    (args.out / "harness.json").write_text(json.dumps({"summary": summary.model_dump(mode="json"), "rows": rows},
                                                      indent=1))
    (args.out / "harness.md").write_text(harness_markdown(rows, summary, args.repeats))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default=os.environ.get("TASKS") or None,
                    help="comma-separated task names (default: $TASKS, else all)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--eval-time", dest="time_budget", type=float, default=2.0, help="timing budget per evaluation (s)")
    ap.add_argument("--ncu-tasks", default=DEFAULT_NCU)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out")
    ap.add_argument("--against", type=Path, help="an earlier harness.json (another version of the judge, same GPU): "
                    "writes harness-cost.md, evaluation time and timed calls per second before and after")
    args = ap.parse_args()
    args.ncu_tasks = set(filter(None, args.ncu_tasks.split(",")))
    names = [n.strip() for n in args.tasks.split(",") if n.strip()] if args.tasks else list_task_names()
    unknown = sorted(set(names) - set(list_task_names()))
    if unknown:
        print(f"error: unknown tasks {unknown}; known: {', '.join(list_task_names())}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / "harness-work"
    t0 = time.perf_counter()
    dev = get_device_info()
    if dev is None:
        print("harness benchmark needs a CUDA device", file=sys.stderr)
        return 2
    log(f"cuBLAS link flags: {' '.join(library_flags('cublas'))}")
    log(f"device {dev.name}: {dev.peak_bandwidth_gbs or 0:.0f} GB/s copy, "
        f"{(dev.peak_fp32_gflops or 0) / 1e3:.1f} TFLOP/s fp32, L2 {dev.l2_bytes >> 20} MiB")
    rows = []
    for name in names:
        log(f"{name} ...")
        try:
            rows.append(bench_task(name, args, work))
        except Exception as exc:
            rows.append({"task": name, "status": "error", "message": f"{type(exc).__name__}: {exc}"})
        r = rows[-1]
        log(f"{name}: {r.get('status')} median {r.get('median_ms')} ms, eval {r.get('eval_s')} s"
            + (f", library {r.get('library_status')} {r.get('library_ms')} ms" if r.get("library_status") else ""))
        write_reports(rows, dev, args, t0)   # after every task: a run cut short still leaves its table
    write_reports(rows, dev, args, t0)
    print(harness_table(rows))
    if args.against is not None:
        before = json.loads(args.against.read_text())["rows"]
        text = cost_table(before, rows)
        (args.out / "harness-cost.md").write_text(text)
        print(text)
    return 0


def cost_table(before: list[dict], after: list[dict]) -> str:
    """Per task: the second evaluation's seconds, the timing loop's calls per second and the median, before
    and after (a change of the judge measured on one GPU), and the totals."""
    old = {r["task"]: r for r in before}
    lines = ["| task | eval s before | eval s after | change | calls/s before | calls/s after | median ms before | "
             "median ms after |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    tot_b = tot_a = 0.0

    def rate(r: dict) -> float | None:
        return r["reps"] / r["timing_s"] if r.get("reps") and r.get("timing_s") else None

    def f(x: float | None, digits: int = 2) -> str:
        return "-" if x is None else f"{x:.{digits}f}"
    for r in after:
        b = old.get(r["task"])
        if b is None or b.get("eval_s") is None or r.get("eval_s") is None:
            continue
        tot_b, tot_a = tot_b + b["eval_s"], tot_a + r["eval_s"]
        lines.append(f"| {r['task']} | {f(b['eval_s'])} | {f(r['eval_s'])} | {100 * (r['eval_s'] / b['eval_s'] - 1):+.1f}% "
                     f"| {f(rate(b), 0)} | {f(rate(r), 0)} | {f(b.get('median_ms'), 4)} | {f(r.get('median_ms'), 4)} |")
    if tot_b:
        lines.append(f"| **all** | {tot_b:.2f} | {tot_a:.2f} | {100 * (tot_a / tot_b - 1):+.1f}% | | | | |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
