"""The tuning benchmark's report (tune.md): per kernel, the written point, the exhaustive best and what the
replayed searches found (cuda_llm/tools/tune/tune_replay.py's summaries), then every point of each space."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from cuda_llm.report.formats import fmt_ms, md_table
from cuda_llm.tools.bounds.speed_of_light import SOL_NOTE
from cuda_llm.tools.tune.tuning import point_text

HEAD = ["kernel", "points (valid)", "written", "written ms", "exhaustive best", "best ms", "found ms (median)",
        "found / best (median, worst)", "exact best found", "evaluations (mean)"]


def _point(params: Mapping[str, str] | None) -> str:
    return point_text(dict(params or {})) or "-"


def tune_markdown(results: Sequence[Mapping[str, Any]], device: str, budget: int, seeds: int) -> str:
    """tune.md from tune_replay.summarize's results, one per kernel."""
    lines = [f"# Tuning benchmark ({device})", "",
             f"Search: cuda_llm.tools.tune.tuning.search with a budget of {budget} timed points, replayed over the "
             f"exhaustive table (every point measured once with the harness) for {seeds} seeds.", ""]
    rows = []
    for r in results:
        found = [x["found_ms"] for x in r["runs"] if x["found_ms"] is not None]
        rows.append([r["task"], f"{r['space']} ({r['valid']})", _point(r["written"]["params"]),
                     fmt_ms(r["written"]["ms"]),
                     _point(r["best"]["params"] if r["best"] else None), fmt_ms(r["best"]["ms"] if r["best"] else None),
                     fmt_ms(statistics.median(found) if found else None),
                     f"{r['median_ratio']:.3f}, {r['worst_ratio']:.3f}" if r["median_ratio"] else "-",
                     f"{r['exact_hits']}/{len(r['runs'])}",
                     f"{r['mean_evaluations']:.1f} of {r['passing']}" if r["mean_evaluations"] is not None else "-"])
    lines += [md_table(HEAD, rows), "", SOL_NOTE, ""]
    for r in results:
        lines += [f"## {r['task']}: every point (compile {r['compile_s']:.0f} s, measure {r['measure_s']:.0f} s)", ""]
        pts = sorted(r["points"], key=lambda p: (p["ms"] is None, p["ms"] or 0))
        lines += [md_table(["point", "status", "ms", "% SOL"],
                           [[_point(p["params"]), p["status"], fmt_ms(p["ms"]),
                             f"{p['pct_of_sol']:.0f}" if p["pct_of_sol"] is not None else "-"] for p in pts]), ""]
    return "\n".join(lines)
