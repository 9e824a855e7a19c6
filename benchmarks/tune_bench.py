"""Tuning benchmark on the GPU: how close does the tuner get to the exhaustive best, with how many
evaluations? Three parametric kernels (tests/fixtures/tune/: a tiled sgemm, a reduction, a transpose).

For each kernel every point of its space is compiled (in parallel) and measured once with the harness
(every correctness case, then timing): the exhaustive table. The search (cuda_llm.tools.tune.tuning.search,
Optuna's sampler) is then replayed over that table with several seeds and a budget smaller than the
space: each point it asks for gets the measurement of the table, so the comparison with the exhaustive
best is not blurred by a second measurement's noise. Writes bench-out/tune.md and bench-out/tune.json.

    python benchmarks/tune_bench.py [--out bench-out] [--budget 10] [--seeds 5] [--eval-time 1]
                                    [--tasks sgemm,reduce_sum,transpose]

Needs a CUDA device (the measurements are real: nvcc, the GPU worker, event timing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from cuda_llm.tools.tune.tune_replay import ExhaustiveTable

KERNELS = {"sgemm": "sgemm_tiled.cu", "reduce_sum": "reduce_items.cu", "transpose": "transpose_tiled.cu"}
FIXTURES = ROOT / "tests" / "fixtures" / "tune"


def exhaustive(task: str, eval_time: float, jobs: int) -> ExhaustiveTable:
    """Every point compiled and measured once: the ExhaustiveTable the search is replayed over."""
    from cuda_llm.tasks import load_task
    from cuda_llm.tools.compiler.compile import compile_many
    from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate
    from cuda_llm.tools.harness.timing_budget import TimingBudget
    from cuda_llm.tools.tune.tune_replay import ExhaustiveTable
    from cuda_llm.tools.tune.tuning import all_points, apply_point, parse_tunables

    loaded = load_task(task)
    source = (FIXTURES / KERNELS[task]).read_text()
    tunables = parse_tunables(source)
    points = all_points(tunables)
    sources = [apply_point(source, tunables, p) for p in points]
    t0 = time.monotonic()
    compiled = compile_many(sources, jobs=jobs)
    compile_s = time.monotonic() - t0
    opts = EvalOptions(budget=TimingBudget(time_budget_s=eval_time))
    table: dict[tuple[str, ...], tuple[Any, Any]] = {}
    for i, (p, src, comp) in enumerate(zip(points, sources, compiled)):
        res = evaluate_candidate(loaded, src, candidate=f"point{i}", options=opts) if comp.ok else None
        table[tuple(p.values())] = (comp, res)
        ms = res.median_ms if res is not None else None
        print(f"[tune-bench] {task} {i + 1}/{len(points)} {p}: "
              f"{res.status.value if res is not None else 'compile_error'} {ms if ms is not None else ''}", flush=True)
    return ExhaustiveTable(task=task, source=source, tunables=tunables, table=table, compile_s=compile_s,
                           measure_s=time.monotonic() - t0 - compile_s)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    ap.add_argument("--budget", type=int, default=10, help="timed points the search may use (default 10)")
    ap.add_argument("--seeds", type=int, default=5, help="searches replayed per kernel (default 5)")
    ap.add_argument("--eval-time", type=float, default=1.0, help="timing seconds per point (default 1)")
    ap.add_argument("--tasks", default=",".join(KERNELS), help="kernels to run (default: all three)")
    args = ap.parse_args(argv)
    from cuda_llm.report.tune_report import tune_markdown
    from cuda_llm.tools.device.device_probe import has_cuda_device
    from cuda_llm.tools.tune.tune_replay import summarize

    tasks = [t for t in args.tasks.split(",") if t]
    unknown = [t for t in tasks if t not in KERNELS]
    if unknown:                                   # before the device check: a typo is a typo on any machine
        print(f"tune_bench: unknown kernel {unknown[0]!r}; known: {', '.join(KERNELS)}", file=sys.stderr)
        return 2
    if not has_cuda_device():
        print("tune_bench: no CUDA device here; run it on the GPU machine", file=sys.stderr)
        return 2
    from cuda_llm.tools.harness.device_info import get_device_info

    device = get_device_info().name
    args.out.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    text = ""
    for task in tasks:
        results.append(summarize(exhaustive(task, args.eval_time, os.cpu_count() or 1), args.budget, args.seeds))
        text = tune_markdown(results, device, args.budget, args.seeds)   # after each kernel: partial results count
        (args.out / "tune.md").write_text(text)
        (args.out / "tune.json").write_text(json.dumps(results, indent=1, default=str))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
