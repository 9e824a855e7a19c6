"""What a candidate costs on the GPU inside a batch: from the ``gpu_job`` events of each run's trace (which GPU
ran which job, from when to when), the GPU seconds of every candidate (its evaluation, profile, confirmation
and head-to-head legs), split into the first candidate of each problem (which makes the problem's inputs
and references on that GPU) and the later ones (which should find them made), against a target.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel

from cuda_llm.report.formats import md_table

TARGET_S = 20.0
BASELINE_KINDS = ("baseline", "library")


class CandidateCost(BaseModel):
    task: str
    candidate: str
    gpu_s: float                 # seconds of GPU jobs (done, and lost attempts too: they held a GPU)
    jobs: int
    gpus: list[str]
    first: bool                  # the problem's first candidate on the GPU


def _base_id(candidate: str) -> str:
    """c-r1c0-confirm, r1c0-h2h-1 -> r1c0: a candidate's jobs under one name."""
    for sep in ("-confirm", "-h2h", "-final"):
        if sep in candidate:
            return candidate.split(sep, 1)[0]
    return candidate


def costs_of_events(task: str, events: Iterable[dict[str, Any]]) -> tuple[list[CandidateCost], float]:
    """(the candidates' costs in the order they started, the baseline's GPU seconds: eager and compile)."""
    per: dict[str, dict[str, Any]] = {}
    baseline_s = 0.0
    for ev in events:
        if ev.get("event") != "gpu_job":
            continue
        name = str(ev.get("candidate") or ev.get("kind") or "")
        secs = float(ev.get("seconds") or 0.0)
        if ev.get("kind") in BASELINE_KINDS or name.startswith("baseline"):
            baseline_s += secs
            continue
        c = per.setdefault(_base_id(name), {"s": 0.0, "n": 0, "gpus": [], "t0": float(ev.get("start") or 0.0)})
        c["s"] += secs
        c["n"] += 1
        c["t0"] = min(c["t0"], float(ev.get("start") or c["t0"]))
        gpu = str(ev.get("gpu", "?"))
        if gpu not in c["gpus"]:
            c["gpus"].append(gpu)
    ordered = sorted(per.items(), key=lambda kv: kv[1]["t0"])
    out = [CandidateCost(task=task, candidate=cid, gpu_s=round(v["s"], 3), jobs=v["n"], gpus=v["gpus"], first=i == 0)
           for i, (cid, v) in enumerate(ordered)]
    return out, round(baseline_s, 3)


def candidate_costs(run_roots: Iterable[Path]) -> dict[str, Any]:
    """Every run's candidates' costs and baselines: {"candidates": [...], "baselines": {task: seconds}}."""
    # local: the trace reader pulls rich
    from cuda_llm.runs.rundir import RunDir
    from cuda_llm.runs.trace import read_trace

    cands: list[CandidateCost] = []
    bases: dict[str, float] = {}
    for root in run_roots:
        rundir = RunDir(Path(root))
        try:
            task = str(rundir.load_config().get("task") or Path(root).name)
            events = list(read_trace(rundir.trace_path))
        except (OSError, ValueError):
            continue
        task = Path(task).name
        got, base = costs_of_events(task, events)
        cands += got
        bases[task] = base
    return {"candidates": cands, "baselines": bases}


def summary(costs: dict[str, Any], target_s: float = TARGET_S) -> dict[str, Any]:
    cands: list[CandidateCost] = costs["candidates"]
    later = [c.gpu_s for c in cands if not c.first]
    first = [c.gpu_s for c in cands if c.first]
    return {"candidates": len(cands), "first_median_s": statistics.median(first) if first else None,
            "later_median_s": statistics.median(later) if later else None,
            "later_max_s": max(later) if later else None,
            "later_within_target": sum(1 for x in later if x <= target_s), "later": len(later), "target_s": target_s,
            "baseline_median_s": statistics.median(costs["baselines"].values()) if costs["baselines"] else None}


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def cost_table(costs: dict[str, Any], target_s: float = TARGET_S) -> str:
    """Markdown: the summary line and one row per problem (first candidate, later ones: median and max)."""
    s = summary(costs, target_s)
    by_task: dict[str, list[CandidateCost]] = {}
    for c in costs["candidates"]:
        by_task.setdefault(c.task, []).append(c)
    rows = []
    for task in sorted(set(by_task) | set(costs["baselines"])):
        cs = by_task.get(task, [])
        later = [c.gpu_s for c in cs if not c.first]
        first = next((c.gpu_s for c in cs if c.first), None)
        rows.append([task, _s(costs["baselines"].get(task)), _s(first), str(len(later)),
                     _s(statistics.median(later) if later else None), _s(max(later) if later else None)])
    head = (f"## What a candidate costs inside the batch (GPU seconds per candidate: evaluation, profile, "
            f"confirmation, head-to-head)\n\n- candidates: {s['candidates']}; the first of each problem: median "
            f"{_s(s['first_median_s'])} s; the later ones: median {_s(s['later_median_s'])} s, max "
            f"{_s(s['later_max_s'])} s, {s['later_within_target']} of {s['later']} within the {target_s:g} s target\n"
            f"- the baseline (eager and torch.compile, compile warm-up included), per problem: median "
            f"{_s(s['baseline_median_s'])} s\n\n")
    return head + md_table(("problem", "baseline s", "first candidate s", "later candidates", "later median s",
                            "later max s"), rows) + "\n"
