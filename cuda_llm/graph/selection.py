"""Whether a candidate replaces the best: faster beyond the measurement noise, confirmed by a re-run.

Each timing gives an interval [min, q75] of its samples. A candidate is clearly faster when its whole
interval lies below the best's (its q75 under the best's minimum): a lucky median inside the noise
never wins. A clear win is then timed again, and must be clear again, before it becomes the best.
"""

from __future__ import annotations

from typing import Sequence

from cuda_llm.results import EvalResult, Status, TimingResult


def _q(samples: Sequence[float], q: float) -> float:
    xs = sorted(samples)
    if not xs:
        raise ValueError("no samples")
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def interval(timing: TimingResult) -> tuple[float, float]:
    """(low, high) of one timing: min and 75th percentile of the samples (median +- IQR/2 without samples)."""
    if timing.samples_ms:
        return min(timing.samples_ms), _q(timing.samples_ms, 0.75)
    return max(timing.min_ms, timing.median_ms - timing.iqr_ms / 2), timing.median_ms + timing.iqr_ms / 2


def clearly_faster(cand: tuple[float, float], best: tuple[float, float] | None) -> bool:
    """The candidate's interval lies entirely below the best's."""
    if best is None:
        return True
    return cand[1] < best[0]


def is_win(result: EvalResult) -> bool:
    """Only correct, trusted, timed results can become the best (``suspect`` timings never do)."""
    return result.status == Status.ok and result.timing is not None


def pick_fastest(results: Sequence[EvalResult]) -> EvalResult | None:
    """The round's fastest trusted result by median (ties: the first)."""
    ok = [r for r in results if is_win(r)]
    return min(ok, key=lambda r: r.timing.median_ms) if ok else None


def decide(candidate: EvalResult, best: tuple[float, float] | None, confirm: EvalResult | None = None) -> tuple[bool, str]:
    """(replaces, why). Without ``confirm`` this is the first test (whether a re-run is worth it)."""
    if not is_win(candidate):
        return False, f"not a trusted pass ({candidate.status.value})"
    first = interval(candidate.timing)
    if not clearly_faster(first, best):
        return False, f"within noise: [{first[0]:.4g}, {first[1]:.4g}] ms overlaps the best's [{best[0]:.4g}, {best[1]:.4g}] ms"
    if confirm is None:
        return True, "clearly faster; needs a confirming re-run"
    if not is_win(confirm):
        return False, f"re-run not a trusted pass ({confirm.status.value}): {confirm.message[:120]}"
    again = interval(confirm.timing)
    if not clearly_faster(again, best):
        return False, f"not confirmed: re-run [{again[0]:.4g}, {again[1]:.4g}] ms overlaps the best's"
    return True, f"confirmed: [{first[0]:.4g}, {first[1]:.4g}] then [{again[0]:.4g}, {again[1]:.4g}] ms"
