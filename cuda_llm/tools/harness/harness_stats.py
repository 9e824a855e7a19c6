"""The harness benchmark's figures: the spread of a kernel's median over repeated timings, its event time
against Nsight Compute's, and the summary over every task's row.

A row is one task's figures as a dict (benchmarks/harness_bench.py measures them on the GPU and writes
them to harness.json unchanged); missing figures are absent or None. Pure, so that the GPU machine's
report is tested on the CPU.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from cuda_llm.results import DeviceInfo

# the suite's first eight tasks: their median evaluation time is reported apart (the figure measured first)
FIRST8 = frozenset({"gelu", "softmax", "layernorm", "sgemm", "transpose", "reduce_sum", "prefix_sum", "histogram"})
SPREAD_MIN_MS = 0.02     # shorter kernels: the spread of their median is launch noise, not the harness's
NCU_MIN_MS = 0.05        # shorter kernels: event and Nsight Compute times differ by fixed overheads

Row = Mapping[str, Any]


class HarnessSummary(BaseModel):
    """The summary of harness.json; None where no row had the figure."""

    device: DeviceInfo
    median_eval_s: float | None = None                 # a second evaluation: compile cached, data warm
    median_eval_s_first8: float | None = None
    clock_issues: dict[str, list[str]] = Field(default_factory=dict)     # task -> the parent clock's findings
    max_spread_pct_ge_20us: float | None = None
    max_event_vs_ncu_pct_ge_50us: float | None = None  # largest |event - ncu| in %
    seconds: float = 0.0


def spread_pct(medians_ms: Sequence[float]) -> float | None:
    """How far the medians of repeated timings of one kernel lie apart, in % of their median; None for
    fewer than two timings."""
    if len(medians_ms) < 2:
        return None
    mid = statistics.median(medians_ms)
    if mid <= 0:
        raise ValueError(f"timing medians must be positive, got {list(medians_ms)}")
    return 100 * (max(medians_ms) - min(medians_ms)) / mid


def event_vs_ncu_pct(event_ms: float, ncu_ms: float) -> float:
    """The event median against Nsight Compute's gpu__time_duration.sum, in % (positive: events longer)."""
    if ncu_ms <= 0:
        raise ValueError(f"the Nsight Compute duration must be positive, got {ncu_ms}")
    return 100 * (event_ms / ncu_ms - 1)


def _figures(rows: Iterable[Row], key: str, min_ms: float = 0.0) -> list[float]:
    return [r[key] for r in rows if r.get(key) is not None and (r.get("median_ms") or 0) >= min_ms]


def summarize(rows: Sequence[Row], device: DeviceInfo, seconds: float) -> HarnessSummary:
    """The figures over every row: median evaluation time (all tasks, the first eight), the largest spread
    of a median and the largest |event - ncu| among kernels long enough for them to mean something."""
    evals = _figures(rows, "eval_s")
    first8 = _figures((r for r in rows if r.get("task") in FIRST8), "eval_s")
    big = _figures(rows, "spread_pct", SPREAD_MIN_MS)
    ncu = [abs(v) for v in _figures(rows, "event_vs_ncu_pct", NCU_MIN_MS)]
    return HarnessSummary(
        device=device,
        median_eval_s=statistics.median(evals) if evals else None,
        median_eval_s_first8=statistics.median(first8) if first8 else None,
        clock_issues={r["task"]: r["clock_issues"] for r in rows if r.get("clock_issues")},
        max_spread_pct_ge_20us=max(big) if big else None,
        max_event_vs_ncu_pct_ge_50us=max(ncu) if ncu else None,
        seconds=seconds,
    )
