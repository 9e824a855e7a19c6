"""Throughput benchmark: candidates evaluated per GPU-hour, today's path against the GPU pool.

Scripted candidates, not an LLM: real softmax kernels (the loop benchmark's variants, each copy a distinct
source), all compiled before the clock starts (in a run the coders compile them while they write), then
evaluated (validated on every shape, timed at the benchmark shape) in one go by each path:

- today: the plain evaluator (one GpuEvaluator), one candidate after another, as a run measured before the pool;
- pool-1: the GPU pool with one GPU (``--gpus 0``): its cost against today's path (target: at most 5%);
- pool-N: the pool over every GPU of the machine: the rate per GPU against pool-1 (target: at least 0.9 x N
  the one-GPU rate in total);
- ray: the pool through Ray actors on this machine (a local Ray cluster, one actor per GPU), where ray is
  installed; otherwise the row says "not installed".

Each path gets its own fresh run cache, so every evaluation is measured. The table (throughput.md) also says,
per kernel, how far the medians of the paths lie apart (the same kernels timed on other GPUs and by other
paths should agree within 2%).

    python benchmarks/throughput_bench.py --out bench-out                 # ~3 min on one H100
    python benchmarks/throughput_bench.py --out bench-out --candidates 24 --modes pool-1,pool-N
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = ("block-256", "naive-256", "block-32", "block-256-extra")
MODES = ("today", "pool-1", "pool-N", "ray")


def sources(n: int) -> list[tuple[str, str]]:
    """(candidate id, source): n real softmax kernels, cycling over the variants, each copy distinct."""
    from scripted_answers import kernel          # the loop benchmark's kernels

    text = {v: kernel(v) for v in VARIANTS}
    return [(f"t{i:02d}-{VARIANTS[i % len(VARIANTS)]}", text[VARIANTS[i % len(VARIANTS)]] + f"\n// copy {i}\n")
            for i in range(n)]


def precompile(cands: list[tuple[str, str]], arch: str) -> None:
    from cuda_llm.tools.compile import compile_source

    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as ex:
        for comp in ex.map(lambda s: compile_source(s, arch=arch), [s for _, s in cands]):
            if not comp.ok:
                raise SystemExit(f"a benchmark kernel does not compile: {comp.errors[:500]}")


def measure(name: str, evaluator: Any, gpus: int, loaded: Any, cands: list[tuple[str, str]], work: Path) -> dict:
    """Evaluate every candidate through ``evaluator`` (wrapped in a fresh run cache): wall time and results."""
    from cuda_llm.graph.evaluator import CachedEvaluator

    cached = CachedEvaluator(evaluator, work / name / "cache")
    jobs = [(src, cid, work / name / cid) for cid, src in cands]
    t0 = time.perf_counter()
    results = [got.value for got in cached.evaluate_each(loaded, jobs)]
    wall = time.perf_counter() - t0
    passed = sum(1 for r in results if r.status.passed)
    rate = len(results) / (wall / 3600.0) / max(1, gpus)
    return {"mode": name, "gpus": gpus, "candidates": len(results), "passed": passed, "wall_s": round(wall, 2),
            "per_gpu_hour": round(rate, 1), "status": "ok" if passed == len(results) else f"{len(results) - passed} failed",
            "medians": {r.candidate: r.timing.median_ms for r in results if r.timing is not None},
            "statuses": {r.candidate: r.status.value for r in results}}


def spread(rows: list[dict], cands: list[tuple[str, str]]) -> dict[str, float]:
    """Per variant: the largest relative gap between the medians of one kernel across the paths (%)."""
    out: dict[str, float] = {}
    for variant in VARIANTS:
        gaps = []
        for cid, _ in cands:
            if not cid.endswith(variant) or cid.endswith(variant + "-extra"):
                continue
            ms = [r["medians"][cid] for r in rows if r.get("medians", {}).get(cid)]
            if len(ms) > 1:
                gaps.append((max(ms) - min(ms)) / min(ms) * 100)
        if gaps:
            out[variant] = round(max(gaps), 2)
    return out


def verdicts(rows: list[dict], n_visible: int) -> list[str]:
    by = {r["mode"]: r for r in rows if r.get("per_gpu_hour")}
    lines = []
    if "today" in by and "pool-1" in by:
        cost = 1 - by["pool-1"]["per_gpu_hour"] / by["today"]["per_gpu_hour"]
        lines.append(f"pool on one GPU against today's path: {cost * 100:+.1f}% cost (target: at most 5%): "
                     f"{'met' if cost <= 0.05 else 'NOT met'}")
    if "pool-1" in by and "pool-N" in by and by["pool-N"]["gpus"] > 1:
        n = by["pool-N"]["gpus"]
        x = by["pool-N"]["per_gpu_hour"] * n / by["pool-1"]["per_gpu_hour"]
        lines.append(f"pool on {n} GPUs: {x:.2f}x the one-GPU rate (target: at least {0.9 * n:.1f}x): "
                     f"{'met' if x >= 0.9 * n else 'NOT met'}")
    elif n_visible <= 1:
        lines.append("pool on N GPUs: not measured, this machine has one GPU (the scaling target needs 2 or more)")
    return lines


def write_table(out: Path, rows: list[dict], device: str, n_visible: int, cands: list[tuple[str, str]],
                eval_time: float) -> str:
    from cuda_llm.report.formats import md_table

    table = md_table(("mode", "GPUs", "candidates", "passed", "wall s", "candidates per GPU-hour", "status"),
                     [[r["mode"], str(r.get("gpus", "-")), str(r.get("candidates", "-")), str(r.get("passed", "-")),
                       f"{r['wall_s']:.1f}" if r.get("wall_s") is not None else "-",
                       f"{r['per_gpu_hour']:.0f}" if r.get("per_gpu_hour") else "-", r["status"]] for r in rows])
    gaps = spread(rows, cands)
    text = "\n".join([
        "# Throughput: candidates evaluated per GPU-hour", "",
        f"Device: {device}, {n_visible} visible GPU(s). {len(cands)} scripted softmax candidates (real kernels: "
        f"{', '.join(VARIANTS)}), compiled beforehand; each validated on every shape and timed with "
        f"--eval-time {eval_time:g} s. Scripted candidates, no LLM.", "",
        table, "",
        *[f"- {v}" for v in verdicts(rows, n_visible)],
        "- largest gap between the paths' medians of one kernel: " +
        (", ".join(f"{k} {v:.2f}%" for k, v in gaps.items()) if gaps else "not measured"), ""])
    (out / "throughput.md").write_text(text)
    (out / "throughput.json").write_text(json.dumps({"device": device, "visible": n_visible, "rows": rows,
                                                     "medians_gap_pct": gaps}, indent=1))
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("bench-out"))
    p.add_argument("--candidates", type=int, default=12)
    p.add_argument("--eval-time", type=float, default=2.0, help="timing budget per candidate (s)")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    p.add_argument("--task", default="softmax")
    args = p.parse_args(argv)
    from cuda_llm.graph.evaluator import GpuEvaluator
    from cuda_llm.graph.gpu_pool import local_pool
    from cuda_llm.tasks import load_task
    from cuda_llm.tools.device_probe import cuda_device_count, has_cuda_device

    args.out.mkdir(parents=True, exist_ok=True)
    if not has_cuda_device():
        print("throughput_bench: no CUDA device here; run it on a GPU machine", file=sys.stderr)
        return 2
    n_visible = cuda_device_count()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    loaded = load_task(args.task)
    first = GpuEvaluator(time_budget_s=args.eval_time, profile=False, gpu=0)
    device = first.device.name if first.device else "?"
    cands = sources(args.candidates)
    t0 = time.perf_counter()
    precompile(cands, first.arch)
    print(f"compiled {len(cands)} kernels in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="throughput-") as tmp:
        work = Path(tmp)
        measure("warm-up", first, 1, loaded, cands[:1], work)      # device facts, benchmark data, first loads
        for mode in modes:
            print(f"==== {mode}", file=sys.stderr, flush=True)
            if mode == "today":
                rows.append(measure(mode, first, 1, loaded, cands, work))
            elif mode in ("pool-1", "pool-N"):
                gpus = [0] if mode == "pool-1" else None
                if mode == "pool-N" and n_visible < 2:
                    rows.append({"mode": mode, "status": "not measured: one GPU"})
                    continue
                pool = local_pool(gpus, time_budget_s=args.eval_time, profile=False)
                try:
                    rows.append(measure(mode, pool.client(), len(pool.labels), loaded, cands, work))
                finally:
                    pool.close()
            elif mode == "ray":
                try:
                    from cuda_llm.graph.ray_slots import ray_pool
                except ImportError:
                    rows.append({"mode": mode, "status": "not installed (pip install -e '.[ray]')"})
                    continue
                pool = ray_pool("local", time_budget_s=args.eval_time, profile=False, init={"num_gpus": n_visible})
                try:
                    rows.append(measure(mode, pool.client(), len(pool.labels), loaded, cands, work))
                finally:
                    pool.close()
            else:
                raise SystemExit(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
            print(json.dumps({k: v for k, v in rows[-1].items() if k not in ("medians", "statuses")}), file=sys.stderr)
    print(write_table(args.out, rows, device, n_visible, cands, args.eval_time))
    return 0


if __name__ == "__main__":
    sys.exit(main())
