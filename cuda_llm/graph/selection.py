"""Whether a candidate replaces the best: faster beyond the measurement noise, confirmed head to head.

Each timing gives an interval [min, q75] of its samples. A candidate is clearly faster when its whole
interval lies below the best's (its q75 under the best's minimum): a lucky median inside the noise
never wins. A clear win is then confirmed against the best kernel itself: both are timed in turns in one
job on one GPU (results.HeadToHead), and the challenger is kept when every one of its legs is faster than
every leg of the champion and its median gain exceeds the legs' own spread (at least 1%). Comparing with
the champion's interval from an earlier session would let the drift between sessions decide (a 2.3%
faster sgemm was once rejected that way). Where the best is not a kernel (a PyTorch eager baseline), or
the challenger is decisively faster (every sample at least DECISIVE_RATIO times below the best's minimum: no
drift between sessions makes that, and re-timing a naive champion 100x slower costs the most), the win is
confirmed by a re-run of the challenger alone that must be clear again.
"""

from __future__ import annotations

from typing import Sequence

from cuda_llm.results import CHALLENGER, CHAMPION, EvalResult, HeadToHead, Status, TimingResult

HEAD_TO_HEAD_MIN_GAIN = 0.01     # a head-to-head win must be at least this large (and larger than the legs' spread)
DECISIVE_RATIO = 3.0             # a win this large is confirmed by a re-run alone, without re-timing the champion
# two GPUs of one kind differ by a few percent (clocks, heat): a candidate timed on another GPU than the best
# and slower by less than this is not judged from the two timings but head to head on one GPU
CROSS_GPU_SPREAD = 0.05


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


def worth_a_head_to_head(cand: tuple[float, float], best: tuple[float, float] | None,
                         spread: float = CROSS_GPU_SPREAD) -> bool:
    """A candidate timed on another GPU than the best, not clearly faster, but within what two GPUs differ:
    its fastest sample under the best's q75 stretched by ``spread``."""
    return best is not None and cand[0] < best[1] * (1.0 + spread)


def decisive(cand: tuple[float, float], best: tuple[float, float] | None, ratio: float = DECISIVE_RATIO) -> bool:
    """The candidate's slowest sample (q75) is at least ``ratio`` times below the best's fastest."""
    return best is not None and cand[1] * ratio <= best[0]


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


def _median(xs: Sequence[float]) -> float:
    return _q(xs, 0.5)


def head_to_head_decision(h2h: HeadToHead, min_gain: float = HEAD_TO_HEAD_MIN_GAIN) -> tuple[bool, str]:
    """(keep the challenger, why), from the legs of one head-to-head job (see the module doc). Pure."""
    ours, theirs = h2h.of(CHALLENGER), h2h.of(CHAMPION)
    if not ours or not theirs:
        return False, "head-to-head incomplete: a side has no leg"
    for who, legs in ((h2h.challenger, ours), (h2h.champion, theirs)):
        bad = next((r for r in legs if not is_win(r)), None)
        if bad is not None:
            return False, f"head-to-head: a leg of {who} is not a trusted pass ({bad.status.value}): {bad.message[:120]}"
    a = [r.timing.median_ms for r in ours]
    b = [r.timing.median_ms for r in theirs]
    ma, mb = _median(a), _median(b)
    spread = max((max(a) - min(a)) / ma, (max(b) - min(b)) / mb)
    need = max(min_gain, spread)
    gain = 1.0 - ma / mb
    legs = (f"{h2h.challenger} {', '.join(f'{x:.4g}' for x in a)} ms vs {h2h.champion} "
            f"{', '.join(f'{x:.4g}' for x in b)} ms in one job")
    if max(a) >= min(b):
        return False, f"head-to-head not won: {legs} (a leg of the champion was as fast)"
    if gain <= need:
        return False, f"head-to-head within noise: {legs}, {100 * gain:.1f}% faster, needs more than {100 * need:.1f}%"
    return True, f"won head to head: {legs}, {100 * gain:.1f}% faster (noise {100 * spread:.1f}%)"
