"""Measuring evaluation throughput: paths (today's evaluator, the GPU pool over one or N GPUs, Ray) that
evaluate the same candidates, the wall time of every call, and what the pool itself costs.

Used by benchmarks/throughput_bench.py on a GPU machine; tested on the CPU with test evaluators. Today's path
and the pool on one GPU measure one GPU one candidate after another, so ``measure_paired`` runs each candidate
through both back to back, the order alternating, and ``pair_cost`` compares the twins: a pass over the
candidates varies by more than the pool could cost (the timing loop stops when the timings converge; clocks
and heat drift). ``own_cost_ms`` is the pool's queue and thread hand-off per job, from its ``gpu_job`` events.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from pathlib import Path
from typing import Any
from cuda_llm.measure.evaluator import CachedEvaluator


class MeasuredPath:
    """One way of measuring: an evaluator, how many GPUs it spans, the seconds each ``evaluate`` call took (seen
    from the caller) and the ``gpu_job`` events its pool sent. It stands in for the evaluator it wraps."""

    def __init__(self, name: str, evaluator: Any, gpus: int, events: list[dict] | None = None, pool: Any = None):
        self.name, self.inner, self.gpus, self.pool = name, evaluator, gpus, pool
        self.events = events if events is not None else []
        self.calls: list[float] = []
        self.cpu_s = 0.0          # the judges' CPU time while a call of this path ran alone (``judges_cpu_s``)

    def evaluate(self, *args: Any) -> Any:
        t0, c0 = time.perf_counter(), judges_cpu_s(self)
        try:
            return self.inner.evaluate(*args)
        finally:
            self.calls.append(time.perf_counter() - t0)
            self.cpu_s += judges_cpu_s(self) - c0

    def __getattr__(self, name: str) -> Any:     # arch, device, parallelism, build...: the wrapped evaluator's
        return getattr(self.inner, name)


def pool_path(name: str, pool: Any) -> MeasuredPath:
    """A pool's client as a path whose jobs are recorded (their slot-side seconds give the pool's own cost)."""
    events: list[dict] = []
    client = pool.client(on_event=lambda name, **f: events.append({"event": name, **f}))
    return MeasuredPath(name, client, len(pool.labels), events, pool=pool)


def _process_cpu_s(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far (Linux /proc; 0 where it cannot be read)."""
    import os

    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def judges_cpu_s(path: MeasuredPath) -> float:
    """The judges' CPU time so far: this process's (every thread), plus that of the pool's slot processes where
    each GPU's evaluator runs in a process of its own. The GPU workers' own time is not in it."""
    total = time.process_time()
    for slot in getattr(path.pool, "slots", None) or []:
        pid = getattr(slot, "pid", None)
        if pid:
            total += _process_cpu_s(pid)
    return total


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


def measure(path: MeasuredPath, loaded: Any, cands: list[tuple[str, str]], work: Path) -> dict:
    """Every candidate through ``path`` at once, as a round hands them over (wrapped in a fresh run cache):
    the pool over N GPUs measures N side by side. One pass of ``measure_interleaved``."""
    return measure_interleaved([path], loaded, cands, work)[0]


def measure_interleaved(paths: list[MeasuredPath], loaded: Any, cands: list[tuple[str, str]], work: Path,
                        passes: int = 1, progress: Any = None) -> list[dict]:
    """``passes`` passes of every path over all the candidates (each pass handed over at once, as a round does),
    the paths taking turns and the order alternating from pass to pass, each pass with a fresh run cache: two ways
    of measuring many GPUs share the machine's drift, and each row says how far its passes lie apart
    (``pass_rates``: candidates per GPU-hour of each pass)."""
    results: dict[str, list[Any]] = {p.name: [] for p in paths}
    walls: dict[str, list[float]] = {p.name: [] for p in paths}
    busy: dict[str, list[dict[str, float]]] = {p.name: [] for p in paths}
    cpu: dict[str, float] = {p.name: 0.0 for p in paths}
    for k in range(passes):
        for p in paths if k % 2 == 0 else paths[::-1]:
            folder = work / f"{p.name}-p{k}"
            cached = CachedEvaluator(p, folder / "cache")
            seen = len(p.events)
            t0, c0 = time.perf_counter(), judges_cpu_s(p)
            got = [g.value for g in cached.evaluate_each(loaded, [(src, cid, folder / cid) for cid, src in cands])]
            walls[p.name].append(time.perf_counter() - t0)
            cpu[p.name] += judges_cpu_s(p) - c0
            results[p.name] += got
            busy[p.name].append(busy_pct(p.events[seen:]))
            if progress is not None:
                progress(f"pass {k + 1}/{passes}: {p.name} {walls[p.name][-1]:.1f} s")
    rows = []
    for p in paths:
        r = row(p.name, p.gpus, results[p.name], walls[p.name], passes)
        gpus = sorted({g for b in busy[p.name] for g in b})
        r["busy_pct"] = {g: round(statistics.fmean(b.get(g, 0.0) for b in busy[p.name]), 1) for g in gpus}
        r["judge_cpu_s"] = round(cpu[p.name] / max(1, len(results[p.name])), 3)
        r["costs"] = judge_costs([work / f"{p.name}-p{k}" / cid for k in range(passes) for cid, _ in cands])
        r["pass_rates"] = [round(len(cands) / (w / 3600.0) / max(1, p.gpus), 1) for w in walls[p.name] if w > 0]
        rows.append(r)
    return rows


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


def measure_paired(paths: list[MeasuredPath], loaded: Any, cands: list[tuple[str, str]], work: Path,
                   rounds: int = 1, progress: Any = None) -> list[dict]:
    """Every candidate through each path in turn, the order alternating from one candidate (and round) to the
    next, each path with its own fresh run cache per round: the paths share the GPU's drift (clocks, heat) and
    each candidate's wall time on one path has its twin on the other (``pair_cost``)."""
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
                results[p.name].append(got)
            if progress is not None:
                progress(f"round {r + 1}/{rounds}, candidate {i + 1}/{len(cands)}: " +
                         ", ".join(f"{p.name} {walls[p.name][-1]:.2f} s" for p in paths))
    rows = [row(p.name, p.gpus, results[p.name], walls[p.name], rounds) for p in paths]
    for p, r in zip(paths, rows):       # one call at a time here: the judges' CPU time is that call's
        r["judge_cpu_s"] = round(p.cpu_s / max(1, len(results[p.name])), 3)
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


def own_cost_ms(path: MeasuredPath) -> list[float]:
    """The pool's own work per job (queue, hand-off to the GPU's thread and back, trace event), in ms: how long
    each ``evaluate`` call took for its caller less how long the GPU's worker spent on the job (the pool's
    ``gpu_job`` events). Empty when the path is not a pool or its jobs ran side by side."""
    done = [e for e in path.events if e.get("event") == "gpu_job" and e.get("status") == "done"]
    if not done or len(done) != len(path.calls):
        return []
    return [max(0.0, (call - (e["end"] - e["start"])) * 1000.0) for call, e in zip(path.calls, done)]
