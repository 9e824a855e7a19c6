"""Statistics of timing samples and the stopping rule: pure, so it is tested on CPU."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from cuda_llm.tools.harness.timing_budget import TimingBudget


def summarize(samples_ms: Sequence[float]) -> dict[str, float]:
    """median, min, mean, iqr, std and rse (relative standard error of the mean)."""
    if not samples_ms:
        raise ValueError("no timing samples")
    a = np.asarray(samples_ms, dtype=np.float64)
    mean = float(a.mean())
    std = float(a.std(ddof=1)) if a.size > 1 else 0.0
    q1, q3 = np.percentile(a, [25, 75])
    rse = std / math.sqrt(a.size) / mean if mean > 0 and a.size > 1 else math.inf
    return {"median": float(np.median(a)), "min": float(a.min()), "mean": mean, "iqr": float(q3 - q1),
            "std": std, "rse": rse}


def should_stop(samples_ms: Sequence[float], *, elapsed_s: float, budget: TimingBudget) -> str | None:
    """Why to stop now ("rse", "budget", "max_reps"), or None to take another sample, by ``budget``.

    ``budget.min_time_s``: sample at least this long before the error target may stop the loop. Ten samples
    of a sub-millisecond kernel reach 1% RSE at once, yet their median moves by a few percent from one timing
    to the next; a few hundred samples (a fraction of a second) hold it within 1-2%.
    """
    n = len(samples_ms)
    if n >= budget.max_reps:
        return "max_reps"
    if n >= budget.min_reps and elapsed_s >= budget.min_time_s and summarize(samples_ms)["rse"] <= budget.rse_target:
        return "rse"
    if elapsed_s >= budget.time_budget_s and n >= min(3, budget.min_reps):
        return "budget"
    return None


def hidden_work(event_median_ms: float, hidden_median_ms: float | None, *, abs_ms: float = 0.02,
                rel: float = 0.05) -> bool:
    """True when the device stayed busy after solve()'s stop event completed for longer than noise.

    Work launched on a non-blocking stream escapes the events on the default stream; a full device
    synchronize still waits for it, and that wait is what ``hidden_median_ms`` measures.
    """
    if hidden_median_ms is None:
        return False
    return hidden_median_ms > abs_ms + rel * event_median_ms


def clock_issues(samples_ms: Sequence[float], start_s: float | None, marks: Sequence[tuple[str, float]], *,
                 abs_ms: float = 0.1, rel: float = 0.1, fit_slack_ms: float = 1.0
                 ) -> tuple[list[str], dict[str, float | None]]:
    """Check the event times the worker reported against the parent's own clock.

    ``marks`` are the worker's one-line reports inside the timing loop, in arrival order, with the parent's
    arrival time: ("t", at) after each timed call, ("b", at) after each blank iteration, which does what a
    timed call does (set switch, poison, L2 flush, synchronize, events) except calling solve(); blanks are
    interleaved with the calls, so both see the same machine. ``start_s`` is the arrival of the line sent
    just before the loop. Returns (issues, figures):

    - the number of samples must equal the number of timed calls that reached the parent;
    - the samples must fit in the interval the loop took on the parent's clock;
    - the median over calls of (its interval minus that of the nearest blank), the cost of solve() as the
      host saw it, must not exceed the event median by more than ``abs_ms + rel * median``: the events missed device
      work (a stream they do not cover), or the reported times were forged smaller.
    """
    fig: dict[str, float | None] = {"parent_call_ms": None, "parent_blank_ms": None, "parent_solve_ms": None,
                                    "event_median_ms": None, "loop_s": None}
    issues: list[str] = []
    calls = [at for kind, at in marks if kind == "t"]
    if len(samples_ms) != len(calls):
        issues.append(f"the worker reported {len(samples_ms)} timing samples, but {len(calls)} timed calls "
                      f"reached the parent")
        return issues, fig
    if not samples_ms or start_s is None:
        return issues, fig
    med = float(np.median(samples_ms))
    fig["event_median_ms"] = med
    loop_ms = (marks[-1][1] - start_s) * 1e3
    fig["loop_s"] = loop_ms / 1e3
    total = float(np.sum(samples_ms))
    if total > loop_ms * 1.01 + fit_slack_ms:
        issues.append(f"the reported event times add up to {total:.4g} ms, more than the {loop_ms:.4g} ms the "
                      f"timed calls took on the parent's clock")
    times = np.asarray([start_s] + [at for _, at in marks], dtype=np.float64)
    gaps = np.diff(times) * 1e3
    kinds = np.asarray([kind for kind, _ in marks])
    fig["parent_call_ms"] = float(np.median(gaps[kinds == "t"]))
    if not (kinds == "b").any():
        issues.append("the worker did not report the blank calls that the parent's clock is checked against")
        return issues, fig
    fig["parent_blank_ms"] = float(np.median(gaps[kinds == "b"]))
    # each call against its nearest blank: a machine that slows down or speeds up during the loop (other
    # work on the host, clocks) moves both alike
    t_idx, b_idx = np.flatnonzero(kinds == "t"), np.flatnonzero(kinds == "b")
    pos = np.clip(np.searchsorted(b_idx, t_idx), 1, max(1, b_idx.size - 1)) if b_idx.size > 1 else np.zeros_like(t_idx)
    left, right = b_idx[np.maximum(pos - 1, 0)], b_idx[np.minimum(pos, b_idx.size - 1)]
    nearest = np.where(np.abs(t_idx - left) <= np.abs(right - t_idx), left, right)
    solve_ms = float(np.median(gaps[t_idx] - gaps[nearest]))
    fig["parent_solve_ms"] = solve_ms
    if solve_ms > med + abs_ms + rel * med:
        issues.append(f"on the parent's clock each timed call took {solve_ms:.4g} ms more than the same loop "
                      f"without solve(), but the events say {med:.4g} ms: device work the events do not cover, "
                      f"or times that were not measured")
    return issues, fig
