"""Statistics of timing samples and the stopping rule: pure, so it is tested on CPU."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


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


def should_stop(samples_ms: Sequence[float], *, elapsed_s: float, budget_s: float, rse_target: float = 0.01,
                min_reps: int = 10, max_reps: int = 500, min_time_s: float = 0.0) -> str | None:
    """Why to stop now ("rse", "budget", "max_reps"), or None to take another sample.

    ``min_time_s``: sample at least this long before the error target may stop the loop. Ten samples of a
    sub-millisecond kernel reach 1% RSE at once, yet their median moves by a few percent from one timing to
    the next; a few hundred samples (a fraction of a second) hold it within 1-2%.
    """
    n = len(samples_ms)
    if n >= max_reps:
        return "max_reps"
    if n >= min_reps and elapsed_s >= min_time_s and summarize(samples_ms)["rse"] <= rse_target:
        return "rse"
    if elapsed_s >= budget_s and n >= min(3, min_reps):
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
