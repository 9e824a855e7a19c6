"""The edges of the loop's and the judge's rules that a mutation run found unpinned (docs/mutation.md): each
test here kills mutants that survived the module's other tests, at the exact boundary a rule states. Pure,
no torch, no GPU."""

from __future__ import annotations

import pytest

from cuda_llm.graph import selection
from cuda_llm.results import CHALLENGER, CHAMPION, EvalResult, HeadToHead, Status, TimingResult


def _timing(samples: list[float], median: float | None = None, iqr: float = 0.0, lo: float | None = None):
    med = median if median is not None else sorted(samples)[len(samples) // 2]
    return TimingResult(sizes={}, median_ms=med, min_ms=lo if lo is not None else min(samples or [med]),
                        mean_ms=med, iqr_ms=iqr, rse=0.01, samples_ms=samples, repetitions=max(len(samples), 1),
                        stop_reason="rse")


def _res(ms: float, status: Status = Status.ok) -> EvalResult:
    return EvalResult(task="t", candidate="c", source_hash="h", status=status, timing=_timing([ms]))


def _h2h(ours: list[float], theirs: list[float], order: list[str] | None = None) -> HeadToHead:
    legs, who = [], []
    for a, b in zip(ours, theirs):
        who += [CHALLENGER, CHAMPION]
        legs += [_res(a), _res(b)]
    return HeadToHead(challenger="r3c0", champion="r2c1", order=order or who, legs=legs)


# ---------------------------------------------------------------- graph.selection
def test_the_interval_of_a_timing_without_samples_is_the_median_plus_minus_half_the_iqr():
    t = _timing([], median=2.0, iqr=0.4, lo=1.5)
    assert selection.interval(t) == pytest.approx((1.8, 2.2))
    t = _timing([], median=2.0, iqr=0.4, lo=1.9)                 # never below the fastest call
    assert selection.interval(t) == pytest.approx((1.9, 2.2))
    assert selection.interval(_timing([3.0, 1.0, 2.0, 4.0, 5.0])) == pytest.approx((1.0, 4.0))
    assert selection.interval(_timing([1.0, 2.0])) == pytest.approx((1.0, 1.75))   # q75 between two samples


def test_clearly_faster_needs_the_whole_interval_strictly_below():
    assert selection.clearly_faster((1.0, 1.9), (2.0, 3.0))
    assert not selection.clearly_faster((1.0, 2.0), (2.0, 3.0))      # touching is not below
    assert selection.clearly_faster((5.0, 6.0), None)


def test_the_head_to_head_boundaries():
    ok, why = selection.head_to_head_decision(HeadToHead(challenger="a", champion="b", order=[CHALLENGER],
                                                         legs=[_res(1.0)]))
    assert not ok and "incomplete" in why                               # the champion has no leg
    ok, why = selection.head_to_head_decision(HeadToHead(challenger="a", champion="b", order=[CHAMPION],
                                                         legs=[_res(1.0)]))
    assert not ok and "incomplete" in why
    ok, why = selection.head_to_head_decision(_h2h([0.5, 0.8], [0.8, 0.81]))   # a leg as fast as the champion's
    assert not ok and "not won" in why
    ok, why = selection.head_to_head_decision(_h2h([0.75], [1.0]), min_gain=0.25)   # exactly the gain needed
    assert not ok and "within noise" in why
    ok, why = selection.head_to_head_decision(_h2h([0.74], [1.0]), min_gain=0.25)
    assert ok and "26.0% faster" in why and "noise 0.0%" in why
    ok, why = selection.head_to_head_decision(_h2h([0.5], [1.0], order=[CHALLENGER, CHAMPION]))
    assert ok
    bad = HeadToHead(challenger="a", champion="b", order=[CHALLENGER, CHAMPION],
                     legs=[_res(0.5), _res(1.0, Status.suspect)])
    ok, why = selection.head_to_head_decision(bad)
    assert not ok and "a leg of b is not a trusted pass (suspect)" in why


def test_quantiles_interpolate_between_neighbours():
    assert selection._q([5.0], 0.75) == 5.0 and selection._q([5.0], 1.0) == 5.0
    assert selection._q([1.0, 2.0, 3.0, 4.0], 0.5) == pytest.approx(2.5)
    assert selection._q([4.0, 1.0, 3.0, 2.0, 10.0], 1.0) == 10.0
    assert selection._q([1.0, 2.0, 4.0, 8.0, 16.0], 0.6) == pytest.approx(5.6)
    assert selection.interval(_timing([2.0])) == (2.0, 2.0)
    with pytest.raises(ValueError, match="no samples"):
        selection._q([], 0.5)


def test_decide_says_why_a_confirming_run_does_not_count():
    best = (2.0, 2.2)
    fast = EvalResult(task="t", candidate="c", source_hash="h", status=Status.ok, timing=_timing([1.0, 1.1, 1.2]))
    broken = EvalResult(task="t", candidate="c", source_hash="h", status=Status.wrong_answer, message="call 3 wrong")
    ok, why = selection.decide(fast, best, confirm=broken)
    assert ok is False and why == "re-run not a trusted pass (wrong_answer): call 3 wrong"
    assert selection.decide(fast, None) == (True, "clearly faster; needs a confirming re-run")


# ---------------------------------------------------------------- graph.stop_rules
def test_the_time_budget_keeps_the_reserve_and_a_round_ahead():
    from types import SimpleNamespace

    from cuda_llm.graph import stop_rules as sr
    from cuda_llm.graph.state import Limits

    b = Limits(time_budget_s=10.0, reserve_s=0.0, max_rounds=50, token_budget=10**9, plateau_rounds=3,
               max_failed_rounds=1)
    assert not sr.time_exhausted(9.5, b) and sr.time_exhausted(10.0, b)         # no next round given: none
    assert not sr.time_exhausted(9.5, b, 0.4) and sr.time_exhausted(9.5, b, 0.5)
    assert not sr.time_exhausted(9.5, b, -5.0)                                   # a negative estimate is none
    assert sr.hard_stop(elapsed_s=9.5, tokens=0, budget=b) is None
    assert sr.hard_stop(elapsed_s=9.5, tokens=0, budget=b, next_round_s=0.6) == sr.TIME
    assert sr.stop_after_round(round_=1, plateau_count=0, elapsed_s=9.5, tokens=0, budget=b) is None
    assert sr.stop_after_round(round_=1, plateau_count=0, elapsed_s=1.0, tokens=0, budget=b, failed_rounds=1) == \
        sr.FAILING
    assert sr.time_exhausted(7.0, b.model_copy(update={"reserve_s": 3.0}))
    assert sr.reason_text(sr.PLATEAU, SimpleNamespace(plateau_threshold=0.02)) == "the best latency stopped improving"
    assert sr.reason_text(sr.PLATEAU, SimpleNamespace(plateau_rounds=3)) == "the best latency stopped improving"


def test_the_plateau_patience_and_counter_at_their_edges():
    from cuda_llm.graph import stop_rules as sr

    assert [sr.plateau_patience(3, p) for p in (0.0, 25.0, 50.0, 80.0, 99.0, 120.0)] == [6, 5, 3, 2, 1, 1]
    assert sr.plateau_patience(4, -50.0) == 8                                    # at most twice the base
    assert sr.plateau_patience(1, 0.0) == 2 and sr.plateau_patience(0, None) == 1
    assert sr.plateau_patience(0, 10.0) == 1
    assert sr.update_plateau(0.0, 3, 1.0, 0.02) == (1.0, 0)                      # no reference yet: this one
    assert sr.update_plateau(10.0, 1, 9.0, 0.2) == (10.0, 2)                     # 10% < 20%: flat
    assert sr.update_plateau(10.0, 1, 7.9, 0.2) == (7.9, 0)
    assert not sr.sol_reached(50.0, 0.0) and not sr.sol_reached(100.0, None) and sr.sol_reached(95.0, 0.95)
