"""The best kernel after each round of runs, and what the rounds after the first added: the table of
benchmarks/agent_bench.py, from the data `cuda-llm report RUN --json` prints. Pure."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from cuda_llm.report.formats import fmt_fixed, fmt_ms, md_table


class RoundRow(BaseModel):
    """The best passing kernel of a run once round ``round`` was measured."""

    round: int
    best_ms: float | None = None
    best: str | None = None
    sol_pct: float | None = None      # that kernel's % of its own speed-of-light bound
    library_ms: float | None = None
    naive_ms: float | None = None
    passed: int = 0                   # candidates of this round that passed
    candidates: int = 0

    def ratio(self, other_ms: float | None) -> float | None:
        return other_ms / self.best_ms if other_ms and self.best_ms else None


def round_rows(data: dict[str, Any]) -> list[RoundRow]:
    """Per round: the best passing time so far, the candidate that holds it and its % of speed of light."""
    cands = data.get("candidates") or []
    summary = data.get("summary") or {}
    best: tuple[float, dict[str, Any]] | None = None
    rows = []
    for r in sorted({int(c.get("round") or 0) for c in cands if c.get("round")}):
        mine = [c for c in cands if int(c.get("round") or 0) == r]
        for c in mine:
            ms = c.get("median_ms")
            if c.get("status") == "ok" and ms and (best is None or ms < best[0]):
                best = (float(ms), c)
        timing = (best[1].get("timing") or {}) if best else {}
        rows.append(RoundRow(round=r, best_ms=best[0] if best else None, best=best[1].get("id") if best else None,
                             sol_pct=timing.get("pct_of_sol"), library_ms=summary.get("library_ms"),
                             naive_ms=summary.get("baseline_ms"), candidates=len(mine),
                             passed=sum(1 for c in mine if c.get("status") == "ok")))
    return rows


def gain_after_first(rows: list[RoundRow]) -> float | None:
    """How much faster the last round's best is than round 1's, in % (round 1 best over final best, minus 1)."""
    first, last = (rows[0].best_ms, rows[-1].best_ms) if rows else (None, None)
    return (first / last - 1) * 100 if first and last else None


def round_table(per_task: dict[str, list[RoundRow]]) -> str:
    """Markdown: a row per task and round, then the gain of the rounds after the first per task."""
    rows = [[task, str(r.round), f"{r.passed}/{r.candidates}", fmt_ms(r.best_ms), r.best or "-",
             fmt_fixed(r.sol_pct), fmt_fixed(r.ratio(r.library_ms), 2, "x"), fmt_fixed(r.ratio(r.naive_ms), 1, "x")]
            for task, task_rows in per_task.items() for r in task_rows]
    gains = [[task, fmt_ms(rs[0].best_ms if rs else None), fmt_ms(rs[-1].best_ms if rs else None),
              fmt_fixed(gain_after_first(rs), 1, "%")] for task, rs in per_task.items()]
    return (md_table(["task", "round", "passed", "best ms", "best", "% SOL", "vs library", "vs naive"], rows)
            + "\n\n" + md_table(["task", "round 1 best ms", "final best ms", "gain after round 1"], gains) + "\n")
