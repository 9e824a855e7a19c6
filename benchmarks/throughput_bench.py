"""Throughput benchmark: candidates evaluated per GPU-hour, today's path against the GPU pool.

Scripted candidates, not an LLM: real softmax kernels (the loop benchmark's variants, each copy a distinct
source), all compiled before the clock starts (in a run the coders compile them while they write), then
evaluated (validated on every shape, timed at the benchmark shape) by each path:

- today: the plain evaluator (one GpuEvaluator), one candidate after another, as a run measured before the pool;
- pool-1: the GPU pool with one GPU (``--gpus 0``): its cost against today's path (target: at most 5%);
- pool-N: the pool over every GPU of the machine: the rate per GPU against pool-1 (target: at least 0.9 x N
  the one-GPU rate in total);
- ray: the pool through Ray actors on this machine (a local Ray cluster, one actor per GPU), where ray is
  installed; otherwise the row says "not installed".

today and pool-1 measure the same GPU one candidate after another, so they are compared candidate by candidate:
each candidate goes through both, back to back, the order alternating, for ``--rounds`` passes. The GPU's drift
(clocks, heat) then falls on both alike, and the cost comes with a 95% interval from the spread of the paired
differences; the pool's own work per job (its queue and thread hand-off) is measured apart, as each call's wall
time less the time the GPU's worker spent on it. pool-N and ray hand over every candidate at once, as a round
does. Each path gets its own fresh run cache (per round), so every evaluation is measured. The table
(throughput.md) also says, per kernel, how far the medians of the paths lie apart (the same kernels timed on
other GPUs and by other paths should agree within 2%).

    python benchmarks/throughput_bench.py --out bench-out                 # ~3 min on one H100
    python benchmarks/throughput_bench.py --out bench-out --candidates 24 --rounds 3 --modes today,pool-1
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
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


class Path_:
    """One way of measuring: an evaluator, how many GPUs it spans, the seconds each ``evaluate`` call took (seen
    from the caller) and the ``gpu_job`` events its pool sent. It stands in for the evaluator it wraps."""

    def __init__(self, name: str, evaluator: Any, gpus: int, events: list[dict] | None = None):
        self.name, self.inner, self.gpus = name, evaluator, gpus
        self.events = events if events is not None else []
        self.calls: list[float] = []
        self.cpu_s = 0.0          # this process's CPU time (all threads) while a call of this path ran alone

    def evaluate(self, *args: Any) -> Any:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return self.inner.evaluate(*args)
        finally:
            self.calls.append(time.perf_counter() - t0)
            self.cpu_s += time.process_time() - c0

    def __getattr__(self, name: str) -> Any:     # arch, device, parallelism, build...: the wrapped evaluator's
        return getattr(self.inner, name)


def pool_path(name: str, pool: Any) -> Path_:
    """A pool's client as a path whose jobs are recorded (their slot-side seconds give the pool's own cost)."""
    events: list[dict] = []
    client = pool.client(on_event=lambda name, **f: events.append({"event": name, **f}))
    return Path_(name, client, len(pool.labels), events)


def row(name: str, gpus: int, results: list[Any], walls: list[float], rounds: int = 1) -> dict:
    """The table row of one path: wall per pass over the candidates, rate per GPU-hour, time spent in the timing
    loops (adaptive: it stops when the timings converge, so it differs from pass to pass by the GPU's noise)."""
    wall = sum(walls)
    passed = sum(1 for r in results if r.status.passed)
    timing = sum(r.timing.seconds for r in results if r.timing is not None)
    retimed = sum(1 for r in results if r.timing is not None and r.timing.retimed_because)
    return {"mode": name, "gpus": gpus, "candidates": len(results) // max(1, rounds), "rounds": rounds,
            "passed": passed // max(1, rounds), "wall_s": round(wall / max(1, rounds), 2),
            "timing_s": round(timing / max(1, rounds), 2), "retimed": retimed,
            "eval_s": round(sum(r.seconds for r in results) / max(1, rounds), 2),
            "per_gpu_hour": round(len(results) / (wall / 3600.0) / max(1, gpus), 1) if wall > 0 else None,
            "status": "ok" if passed == len(results) else f"{len(results) - passed} failed",
            "medians": {r.candidate: r.timing.median_ms for r in results if r.timing is not None},
            "statuses": {r.candidate: r.status.value for r in results},
            "walls": [round(w, 4) for w in walls]}


def judge_costs(folders: list[Path]) -> dict[str, float]:
    """The judge's own costs per evaluation (``costs`` of each work folder's eval_result.json: worker start,
    checker, transport, sets upload...), averaged: which of them grows when GPUs measure side by side."""
    sums: dict[str, float] = {}
    n = 0
    for folder in folders:
        try:
            costs = json.loads((folder / "eval_result.json").read_text()).get("costs") or {}
        except (OSError, ValueError):
            continue
        n += 1
        for k, v in costs.items():
            if isinstance(v, (int, float)):
                sums[k] = sums.get(k, 0.0) + float(v)
    return {k: round(v / n, 3) for k, v in sorted(sums.items())} if n else {}


def measure(path: Path_, loaded: Any, cands: list[tuple[str, str]], work: Path) -> dict:
    """Every candidate through ``path`` at once, as a round hands them over (wrapped in a fresh run cache):
    the pool over N GPUs measures N side by side."""
    from cuda_llm.graph.evaluator import CachedEvaluator

    cached = CachedEvaluator(path, work / path.name / "cache")
    jobs = [(src, cid, work / path.name / cid) for cid, src in cands]
    t0, c0 = time.perf_counter(), time.process_time()
    results = [got.value for got in cached.evaluate_each(loaded, jobs)]
    out = row(path.name, path.gpus, results, [time.perf_counter() - t0])
    out["busy_pct"] = busy_pct(path.events)
    out["parent_cpu_s"] = round((time.process_time() - c0) / max(1, len(results)), 3)
    out["costs"] = judge_costs([w for _, _, w in jobs])
    return out


def busy_pct(events: list[dict]) -> dict[str, float]:
    """Per GPU: the share of the pass (first job's start to last job's end, on any GPU) its worker spent on a
    job. Below 100: the GPU waited, for the queue or at the end of the pass for the other GPUs' last jobs."""
    done = [e for e in events if e.get("event") == "gpu_job" and e.get("status") == "done"]
    if not done:
        return {}
    span = max(e["end"] for e in done) - min(e["start"] for e in done)
    out: dict[str, float] = {}
    for e in done:
        out[str(e["gpu"])] = out.get(str(e["gpu"]), 0.0) + (e["end"] - e["start"])
    return {g: round(100.0 * v / span, 1) if span > 0 else 0.0 for g, v in sorted(out.items())}


def measure_paired(paths: list[Path_], loaded: Any, cands: list[tuple[str, str]], work: Path,
                   rounds: int = 1, progress: Any = None) -> list[dict]:
    """Every candidate through each path in turn, the order alternating from one candidate (and round) to the
    next, each path with its own fresh run cache per round: the paths share the GPU's drift (clocks, heat) and
    each candidate's wall time on one path has its twin on the other (``pair_cost``)."""
    from cuda_llm.graph.evaluator import CachedEvaluator

    results: dict[str, list[Any]] = {p.name: [] for p in paths}
    walls: dict[str, list[float]] = {p.name: [] for p in paths}
    for r in range(rounds):
        cached = {p.name: CachedEvaluator(p, work / f"{p.name}-r{r}" / "cache") for p in paths}
        for i, (cid, src) in enumerate(cands):
            order = paths if (i + r) % 2 == 0 else paths[::-1]
            for p in order:
                t0 = time.perf_counter()
                got = cached[p.name].evaluate(loaded, src, cid, work / f"{p.name}-r{r}" / cid)
                walls[p.name].append(time.perf_counter() - t0)
                results[p.name].append(got.value)
            if progress is not None:
                progress(f"round {r + 1}/{rounds}, candidate {i + 1}/{len(cands)}: " +
                         ", ".join(f"{p.name} {walls[p.name][-1]:.2f} s" for p in paths))
    rows = [row(p.name, p.gpus, results[p.name], walls[p.name], rounds) for p in paths]
    for p, r in zip(paths, rows):       # one call at a time here: the process's CPU time is that call's
        r["parent_cpu_s"] = round(p.cpu_s / max(1, len(results[p.name])), 3)
        r["costs"] = judge_costs([work / f"{p.name}-r{k}" / cid for k in range(rounds) for cid, _ in cands])
    return rows


def pair_cost(base: list[float], other: list[float]) -> tuple[float, float]:
    """How much longer ``other`` took than ``base`` over paired wall times, as a fraction of ``base``'s total,
    and the half-width of its 95% confidence interval (from the spread of the per-candidate differences)."""
    if len(base) != len(other) or not base:
        raise ValueError("paired wall times need one twin per candidate")
    diffs = [o - b for b, o in zip(base, other)]
    mean_base = statistics.fmean(base)
    cost = statistics.fmean(diffs) / mean_base
    half = 1.96 * statistics.stdev(diffs) / math.sqrt(len(diffs)) / mean_base if len(diffs) > 1 else float("nan")
    return cost, half


def own_cost_ms(path: Path_) -> list[float]:
    """The pool's own work per job (queue, hand-off to the GPU's thread and back, trace event), in ms: how long
    each ``evaluate`` call took for its caller less how long the GPU's worker spent on the job (the pool's
    ``gpu_job`` events). Empty when the path is not a pool or its jobs ran side by side."""
    done = [e for e in path.events if e.get("event") == "gpu_job" and e.get("status") == "done"]
    if not done or len(done) != len(path.calls):
        return []
    return [max(0.0, (call - (e["end"] - e["start"])) * 1000.0) for call, e in zip(path.calls, done)]


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


def verdicts(rows: list[dict], n_visible: int, paired: dict | None = None) -> list[str]:
    """The targets, met or not. ``paired``: today's path against pool-1 candidate by candidate (``pair_cost``,
    ``own_cost_ms``); without it the two rows' rates are compared."""
    by = {r["mode"]: r for r in rows if r.get("per_gpu_hour")}
    lines = []
    if paired is not None:
        cost, half = paired["cost"], paired["half"]
        reach = (f"; its 95% interval reaches {(cost + half) * 100:+.1f}%, so more rounds would settle it"
                 if cost <= 0.05 < cost + half else "")
        lines.append(f"pool on one GPU against today's path: {cost * 100:+.1f}% cost, 95% interval ±{half * 100:.1f}% "
                     f"({paired['pairs']} candidates measured back to back by both, order alternating; target: at "
                     f"most 5%): {'met' if cost <= 0.05 else 'NOT met'}{reach}")
        own = paired.get("own_ms") or []
        if own:
            share = statistics.median(own) / 1000.0 / max(1e-9, statistics.median(paired["base_walls"])) * 100
            lines.append(f"the pool's own work per job (queue, hand-off to the GPU's thread and back, trace event): "
                         f"median {statistics.median(own):.2f} ms, largest {max(own):.2f} ms ({share:.3f}% of a "
                         f"candidate's evaluation); the rest of any gap is the GPU's and the timing loop's noise")
    elif "today" in by and "pool-1" in by:
        cost = 1 - by["pool-1"]["per_gpu_hour"] / by["today"]["per_gpu_hour"]
        lines.append(f"pool on one GPU against today's path: {cost * 100:+.1f}% cost (target: at most 5%): "
                     f"{'met' if cost <= 0.05 else 'NOT met'}")
    if "pool-1" in by and "pool-N" in by and by["pool-N"]["gpus"] > 1:
        n = by["pool-N"]["gpus"]
        x = by["pool-N"]["per_gpu_hour"] * n / by["pool-1"]["per_gpu_hour"]
        busy = by["pool-N"].get("busy_pct") or {}
        each = (f"; each GPU busy {', '.join(f'{g}: {v:.1f}%' for g, v in busy.items())} of the pass" if busy else "")
        per_job = [by[m]["eval_s"] / by[m]["candidates"] for m in ("pool-1", "pool-N") if by[m].get("eval_s")]
        slower = (f"; one evaluation took {per_job[1] / per_job[0]:.3f}x as long as on one GPU"
                  if len(per_job) == 2 and per_job[0] > 0 else "")
        lines.append(f"pool on {n} GPUs: {x:.2f}x the one-GPU rate (target: at least {0.9 * n:.1f}x): "
                     f"{'met' if x >= 0.9 * n else 'NOT met'}{each}{slower}")
        grew = cost_growth(by["pool-1"].get("costs") or {}, by["pool-N"].get("costs") or {})
        if grew:
            lines.append(f"the judge's costs per evaluation, pool-1 -> pool-N: {grew}")
    retimed = {r["mode"]: r["retimed"] for r in rows if r.get("retimed")}
    if retimed:
        lines.append("timed again because the judge's clock doubted the first timing: " +
                     ", ".join(f"{m} {k}" for m, k in retimed.items()))
    elif n_visible <= 1:
        lines.append("pool on N GPUs: not measured, this machine has one GPU (the scaling target needs 2 or more)")
    return lines


def cost_growth(one: dict[str, float], many: dict[str, float], top: int = 4) -> str:
    """The costs that grew most (seconds) from one GPU to many, e.g. "checker_s 1.20 -> 1.65 s"."""
    keys = sorted((k for k in one if k in many and k != "worker_s"), key=lambda k: one[k] - many[k])[:top]
    return ", ".join(f"{k} {one[k]:.2f} -> {many[k]:.2f} s" for k in keys if many[k] > one[k])


def write_table(out: Path, rows: list[dict], device: str, n_visible: int, cands: list[tuple[str, str]],
                eval_time: float, paired: dict | None = None) -> str:
    from cuda_llm.report.formats import md_table

    table = md_table(("mode", "GPUs", "candidates", "rounds", "passed", "wall s", "of it timing s",
                      "parent CPU s per candidate", "candidates per GPU-hour", "status"),
                     [[r["mode"], str(r.get("gpus", "-")), str(r.get("candidates", "-")), str(r.get("rounds", "-")),
                       str(r.get("passed", "-")),
                       f"{r['wall_s']:.1f}" if r.get("wall_s") is not None else "-",
                       f"{r['timing_s']:.1f}" if r.get("timing_s") is not None else "-",
                       f"{r['parent_cpu_s']:.2f}" if r.get("parent_cpu_s") is not None else "-",
                       f"{r['per_gpu_hour']:.0f}" if r.get("per_gpu_hour") else "-", r["status"]] for r in rows])
    gaps = spread(rows, cands)
    text = "\n".join([
        "# Throughput: candidates evaluated per GPU-hour", "",
        f"Device: {device}, {n_visible} visible GPU(s). {len(cands)} scripted softmax candidates (real kernels: "
        f"{', '.join(VARIANTS)}), compiled beforehand; each validated on every shape and timed with "
        f"--eval-time {eval_time:g} s. Scripted candidates, no LLM. Wall s is per pass over the candidates; "
        "\"of it timing s\" is the part spent in the timing loops, which stop when the timings converge; "
        "\"parent CPU s\" is this process's CPU time (the judges' threads, not the workers) per candidate.", "",
        table, "",
        *[f"- {v}" for v in verdicts(rows, n_visible, paired)],
        "- largest gap between the paths' medians of one kernel: " +
        (", ".join(f"{k} {v:.2f}%" for k, v in gaps.items()) if gaps else "not measured"), ""])
    (out / "throughput.md").write_text(text)
    (out / "throughput.json").write_text(json.dumps({"device": device, "visible": n_visible, "rows": rows,
                                                     "paired": paired, "medians_gap_pct": gaps}, indent=1))
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("bench-out"))
    p.add_argument("--candidates", type=int, default=12)
    p.add_argument("--rounds", type=int, default=1,
                   help="passes of today's path against pool-1, candidate by candidate (more: a tighter interval)")
    p.add_argument("--eval-time", type=float, default=2.0, help="timing budget per candidate (s)")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    p.add_argument("--task", default="softmax")
    args = p.parse_args(argv)
    from cuda_llm.graph.evaluator import GpuEvaluator
    from cuda_llm.graph.gpu_pool import local_pool
    from cuda_llm.tasks import load_task
    from cuda_llm.tools.device_probe import cuda_device_count, has_cuda_device

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        p.error(f"unknown mode {unknown[0]!r}; one of {', '.join(MODES)}")
    args.out.mkdir(parents=True, exist_ok=True)
    if not has_cuda_device():
        print("throughput_bench: no CUDA device here; run it on a GPU machine", file=sys.stderr)
        return 2
    n_visible = cuda_device_count()
    loaded = load_task(args.task)
    first = GpuEvaluator(time_budget_s=args.eval_time, profile=False, gpu=0)
    device = first.device.name if first.device else "?"
    cands = sources(args.candidates)
    t0 = time.perf_counter()
    precompile(cands, first.arch)
    print(f"compiled {len(cands)} kernels in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    rows: list[dict] = []
    paired: dict | None = None
    log = lambda text: print(text, file=sys.stderr, flush=True)     # noqa: E731
    with tempfile.TemporaryDirectory(prefix="throughput-") as tmp:
        work = Path(tmp)
        one = local_pool([0], time_budget_s=args.eval_time, profile=False) if "pool-1" in modes else None
        try:
            single = [Path_("today", first, 1)] if "today" in modes else []
            if one is not None:
                single.append(pool_path("pool-1", one))
            for path in single:        # device facts, benchmark data, first loads: neither path starts cold
                measure(path, loaded, cands[:1], work / "warm-up")
                path.calls.clear()
                path.events.clear()
            if single:
                log("==== " + " against ".join(p.name for p in single) + f", {args.rounds} round(s)")
                rows += measure_paired(single, loaded, cands, work, args.rounds, progress=log)
            if len(single) == 2:
                base, pool1 = rows[-2], rows[-1]
                cost, half = pair_cost(base["walls"], pool1["walls"])
                paired = {"cost": round(cost, 5), "half": round(half, 5), "pairs": len(base["walls"]),
                          "rounds": args.rounds, "own_ms": [round(x, 3) for x in own_cost_ms(single[1])],
                          "base_walls": base["walls"]}
        finally:
            if one is not None:
                one.close()
        for mode in [m for m in modes if m in ("pool-N", "ray")]:
            log(f"==== {mode}")
            if mode == "pool-N":
                if n_visible < 2:
                    rows.append({"mode": mode, "status": "not measured: one GPU"})
                    continue
                pool = local_pool(None, time_budget_s=args.eval_time, profile=False)
            else:
                try:
                    from cuda_llm.graph.ray_slots import ray_pool
                except ImportError:
                    rows.append({"mode": mode, "status": "not installed (pip install -e '.[ray]')"})
                    continue
                pool = ray_pool("local", time_budget_s=args.eval_time, profile=False, init={"num_gpus": n_visible})
            try:
                rows.append(measure(pool_path(mode, pool), loaded, cands, work))
            finally:
                pool.close()
            log(json.dumps({k: v for k, v in rows[-1].items() if k not in ("medians", "statuses", "walls")}))
    print(write_table(args.out, rows, device, n_visible, cands, args.eval_time, paired))
    return 0


if __name__ == "__main__":
    sys.exit(main())
