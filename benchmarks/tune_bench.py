"""Tuning benchmark on the GPU: how close does the tuner get to the exhaustive best, with how many
evaluations? Three parametric kernels (tests/fixtures/tune/: a tiled sgemm, a reduction, a transpose).

For each kernel every point of its space is compiled (in parallel) and measured once with the harness
(every correctness case, then timing): the exhaustive table. The search (cuda_llm.tools.tuning.search,
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
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KERNELS = {"sgemm": "sgemm_tiled.cu", "reduce_sum": "reduce_items.cu", "transpose": "transpose_tiled.cu"}
FIXTURES = ROOT / "tests" / "fixtures" / "tune"


def exhaustive(task: str, eval_time: float, jobs: int) -> dict[str, Any]:
    """Every point compiled and measured once: {key: (compile result, eval result)} and the tunables."""
    from cuda_llm.tasks import load_task
    from cuda_llm.tools.compile import compile_many
    from cuda_llm.tools.evaluate import EvalOptions, evaluate_candidate
    from cuda_llm.tools.tuning import all_points, apply_point, parse_tunables

    loaded = load_task(task)
    source = (FIXTURES / KERNELS[task]).read_text()
    tunables = parse_tunables(source)
    points = all_points(tunables)
    sources = [apply_point(source, tunables, p) for p in points]
    t0 = time.monotonic()
    compiled = compile_many(sources, jobs=jobs)
    compile_s = time.monotonic() - t0
    opts = EvalOptions(time_budget_s=eval_time)
    table: dict[tuple[str, ...], tuple[Any, Any]] = {}
    for i, (p, src, comp) in enumerate(zip(points, sources, compiled)):
        res = evaluate_candidate(loaded, src, candidate=f"point{i}", options=opts) if comp.ok else None
        table[tuple(p.values())] = (comp, res)
        ms = res.median_ms if res is not None else None
        print(f"[tune-bench] {task} {i + 1}/{len(points)} {p}: "
              f"{res.status.value if res is not None else 'compile_error'} {ms if ms is not None else ''}", flush=True)
    return {"task": task, "source": source, "tunables": tunables, "table": table, "compile_s": compile_s,
            "measure_s": time.monotonic() - t0 - compile_s}


def replay(ex: dict[str, Any], budget: int, seed: int) -> Any:
    """The search over the measured table (each point it asks for gets the table's measurement)."""
    from cuda_llm.tools.tuning import TuneBudget, parse_tunables, search

    def key_of(src: str) -> tuple[str, ...]:
        return tuple(t.default for t in parse_tunables(src))

    table = ex["table"]
    return search(ex["source"], ex["tunables"],
                  compile_batch=lambda srcs: [table[key_of(s)][0] for s in srcs],
                  measure=lambda src, p: table[key_of(src)][1], budget=TuneBudget(max_evals=budget, seed=seed, jobs=4))


def summarize(ex: dict[str, Any], budget: int, seeds: int) -> dict[str, Any]:
    from cuda_llm.results import Status
    from cuda_llm.tools.tuning import default_point

    names = [t.name for t in ex["tunables"]]
    rows = []
    for key, (comp, res) in ex["table"].items():
        ok = res is not None and res.status == Status.ok and res.timing is not None
        rows.append({"params": dict(zip(names, key)), "status": res.status.value if res is not None else "compile_error",
                     "ms": res.median_ms if ok else None,
                     "pct_of_sol": res.timing.pct_of_sol if ok else None})
    passing = sorted((r for r in rows if r["ms"] is not None), key=lambda r: r["ms"])
    best = passing[0] if passing else None
    written_key = tuple(default_point(ex["tunables"]).values())
    written = next(r for r in rows if tuple(r["params"].values()) == written_key)
    runs = []
    for seed in range(seeds):
        out = replay(ex, budget, seed)
        found = out.best.ms if out.best is not None else None
        rank = next((i for i, r in enumerate(passing) if r["params"] == (out.best.params if out.best else None)), None)
        runs.append({"seed": seed, "found_ms": found, "params": out.best.params if out.best else None,
                     "evaluations": out.evaluations, "invalid": out.invalid, "sampler": out.sampler,
                     "ratio": (found / best["ms"]) if found and best else None, "rank": rank})
    ratios = [r["ratio"] for r in runs if r["ratio"] is not None]
    return {"task": ex["task"], "space": len(rows), "valid": sum(r["status"] != "compile_error" for r in rows),
            "passing": len(passing), "written": written, "best": best, "budget": budget, "runs": runs,
            "median_ratio": statistics.median(ratios) if ratios else None, "worst_ratio": max(ratios) if ratios else None,
            "exact_hits": sum(r["rank"] == 0 for r in runs),
            "mean_evaluations": statistics.mean(r["evaluations"] for r in runs) if runs else None,
            "compile_s": ex["compile_s"], "measure_s": ex["measure_s"], "points": rows}


def render(results: list[dict[str, Any]], device: str, budget: int, seeds: int) -> str:
    from cuda_llm.report.formats import fmt_ms, md_table

    def pt(p: dict | None) -> str:
        return " ".join(f"{k}={v}" for k, v in (p or {}).items()) or "-"

    lines = [f"# Tuning benchmark ({device})", "",
             f"Search: cuda_llm.tools.tuning.search with a budget of {budget} timed points, replayed over the "
             f"exhaustive table (every point measured once with the harness) for {seeds} seeds.", ""]
    head = ["kernel", "points (valid)", "written", "written ms", "exhaustive best", "best ms", "found ms (median)",
            "found / best (median, worst)", "exact best found", "evaluations (mean)"]
    rows = []
    for r in results:
        found = [x["found_ms"] for x in r["runs"] if x["found_ms"] is not None]
        rows.append([r["task"], f"{r['space']} ({r['valid']})", pt(r["written"]["params"]), fmt_ms(r["written"]["ms"]),
                     pt(r["best"]["params"] if r["best"] else None), fmt_ms(r["best"]["ms"] if r["best"] else None),
                     fmt_ms(statistics.median(found) if found else None),
                     f"{r['median_ratio']:.3f}, {r['worst_ratio']:.3f}" if r["median_ratio"] else "-",
                     f"{r['exact_hits']}/{len(r['runs'])}",
                     f"{r['mean_evaluations']:.1f} of {r['passing']}" if r["mean_evaluations"] is not None else "-"])
    lines += [md_table(head, rows), ""]
    for r in results:
        lines += [f"## {r['task']}: every point (compile {r['compile_s']:.0f} s, measure {r['measure_s']:.0f} s)", ""]
        pts = sorted(r["points"], key=lambda p: (p["ms"] is None, p["ms"] or 0))
        lines += [md_table(["point", "status", "ms", "% SOL"],
                           [[pt(p["params"]), p["status"], fmt_ms(p["ms"]),
                             f"{p['pct_of_sol']:.0f}" if p["pct_of_sol"] is not None else "-"] for p in pts]), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    ap.add_argument("--budget", type=int, default=10, help="timed points the search may use (default 10)")
    ap.add_argument("--seeds", type=int, default=5, help="searches replayed per kernel (default 5)")
    ap.add_argument("--eval-time", type=float, default=1.0, help="timing seconds per point (default 1)")
    ap.add_argument("--tasks", default=",".join(KERNELS), help="kernels to run (default: all three)")
    args = ap.parse_args(argv)
    from cuda_llm.tools.device_probe import has_cuda_device

    if not has_cuda_device():
        print("tune_bench: no CUDA device here; run it on the GPU machine", file=sys.stderr)
        return 2
    from cuda_llm.tools.device_info import get_device_info

    device = get_device_info().name
    args.out.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    text = ""
    for task in [t for t in args.tasks.split(",") if t]:
        if task not in KERNELS:
            print(f"tune_bench: unknown kernel {task!r}; known: {', '.join(KERNELS)}", file=sys.stderr)
            return 2
        results.append(summarize(exhaustive(task, args.eval_time, os.cpu_count() or 1), args.budget, args.seeds))
        text = render(results, device, args.budget, args.seeds)      # written after each kernel: partial results count
        (args.out / "tune.md").write_text(text)
        (args.out / "tune.json").write_text(json.dumps(results, indent=1, default=str))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
