"""The tuner's search replayed over an exhaustive table of measurements: how close it comes to the
exhaustive best, with how many evaluations.

Every point of a kernel's space is measured once (benchmarks/tune_bench.py does it on the GPU); the search
(tuning.search) is then run with several seeds, each point it asks for getting the table's measurement, so
the comparison with the exhaustive best is not blurred by a second measurement's noise. Pure of the
device: the replay and its summary run on the CPU.
"""

from __future__ import annotations

import statistics
from typing import Any

from pydantic import BaseModel, model_validator

from cuda_llm.results import CompileResult, EvalResult, Status
from cuda_llm.tools.tune.tuning import (
    Tunable, TuneBudget, TuneOutcome, all_points, default_point, parse_tunables, search,
)

REPLAY_JOBS = 4          # points per batch the search asks for (compiles cost nothing in a replay)


class ExhaustiveTable(BaseModel):
    """Every point of one kernel's space, compiled and measured once: point values (in the order of the
    tunables) -> (its compile result, its evaluation; None where it did not compile)."""

    task: str
    source: str                        # the kernel as written (its point is the "written" one)
    tunables: list[Tunable]
    table: dict[tuple[str, ...], tuple[CompileResult, EvalResult | None]]
    compile_s: float                   # wall time of compiling every point
    measure_s: float                   # wall time of measuring them

    @model_validator(mode="after")
    def _every_point(self) -> ExhaustiveTable:
        space = {tuple(p.values()) for p in all_points(self.tunables)}
        missing, unknown = space - set(self.table), set(self.table) - space
        if missing or unknown:
            raise ValueError(f"the table of {self.task} must hold every point of its space ({len(space)}) and no "
                             f"other: {len(missing)} missing (e.g. {sorted(missing)[:1]}), {len(unknown)} unknown "
                             f"(e.g. {sorted(unknown)[:1]})")
        return self


def replay(ex: ExhaustiveTable, budget: int, seed: int) -> TuneOutcome:
    """The search over the measured table (each point it asks for gets the table's measurement)."""

    def key_of(src: str) -> tuple[str, ...]:
        return tuple(t.default for t in parse_tunables(src))

    table = ex.table
    return search(ex.source, ex.tunables,
                  compile_batch=lambda srcs: [table[key_of(s)][0] for s in srcs],
                  measure=lambda src, p: table[key_of(src)][1],
                  budget=TuneBudget(max_evals=budget, seed=seed, jobs=REPLAY_JOBS))


def summarize(ex: ExhaustiveTable, budget: int, seeds: int) -> dict[str, Any]:
    """The table's points, the written point, the exhaustive best, and ``seeds`` replays of the search with
    ``budget`` timed points each: what each found, its ratio to the best and its rank among passing points.
    A JSON-ready dict (tune.json holds a list of them)."""
    names = [t.name for t in ex.tunables]
    rows = []
    for key, (_comp, res) in ex.table.items():
        ok = res is not None and res.status == Status.ok and res.timing is not None
        rows.append({"params": dict(zip(names, key)), "status": res.status.value if res is not None else "compile_error",
                     "ms": res.median_ms if ok else None,
                     "pct_of_sol": res.timing.pct_of_sol if ok else None})
    passing = sorted((r for r in rows if r["ms"] is not None), key=lambda r: r["ms"])
    best = passing[0] if passing else None
    written_key = tuple(default_point(ex.tunables).values())
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
    return {"task": ex.task, "space": len(rows), "valid": sum(r["status"] != "compile_error" for r in rows),
            "passing": len(passing), "written": written, "best": best, "budget": budget, "runs": runs,
            "median_ratio": statistics.median(ratios) if ratios else None, "worst_ratio": max(ratios) if ratios else None,
            "exact_hits": sum(r["rank"] == 0 for r in runs),
            "mean_evaluations": statistics.mean(r["evaluations"] for r in runs) if runs else None,
            "compile_s": ex.compile_s, "measure_s": ex.measure_s, "points": rows}
