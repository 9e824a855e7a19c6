"""Pure parts of the graph: stop rules, selection against noise, state reducers, stage list checks."""

from __future__ import annotations

import pytest

from cuda_llm.graph import stop_rules
from cuda_llm.graph.selection import clearly_faster, decide, interval, pick_fastest
from cuda_llm.agents.usage import total_tokens
from cuda_llm.graph.state import RESET, Limits, add_tokens, merge_cands
from cuda_llm.results import EvalResult, Status, TimingResult


def _timed(samples: list[float], status: Status = Status.ok) -> EvalResult:
    med = sorted(samples)[len(samples) // 2]
    t = TimingResult(sizes={}, median_ms=med, min_ms=min(samples), mean_ms=sum(samples) / len(samples), iqr_ms=0.0,
                     rse=0.01, samples_ms=samples, repetitions=len(samples), stop_reason="rse")
    return EvalResult(task="t", candidate="c", source_hash="h", status=status, timing=t)


def test_plateau_counts_rounds_without_enough_improvement():
    ref, n = stop_rules.update_plateau(1.0, 0, 0.99, 0.02)      # 1% better: not enough
    assert (ref, n) == (1.0, 1)
    ref, n = stop_rules.update_plateau(ref, n, 0.985, 0.02)     # 1.5% over the reference: still not
    assert (ref, n) == (1.0, 2)
    ref, n = stop_rules.update_plateau(ref, n, 0.97, 0.02)      # 3% over the reference: resets
    assert (ref, n) == (0.97, 0)
    assert stop_rules.update_plateau(None, 0, 0.5, 0.02) == (0.5, 0)
    assert stop_rules.update_plateau(0.5, 1, None, 0.02) == (0.5, 2)  # nothing measured: no progress


def test_stop_after_round_reasons_in_order():
    b = Limits(max_rounds=5, time_budget_s=100, token_budget=1000, plateau_rounds=3, reserve_s=10)
    kw = dict(round_=1, plateau_count=0, elapsed_s=10, tokens=10, budget=b)
    assert stop_rules.stop_after_round(**kw) is None
    assert stop_rules.stop_after_round(**{**kw, "plateau_count": 3}) == stop_rules.PLATEAU
    assert stop_rules.stop_after_round(**{**kw, "round_": 5}) == stop_rules.MAX_ROUNDS
    assert stop_rules.stop_after_round(**{**kw, "tokens": 1000}) == stop_rules.TOKENS
    assert stop_rules.stop_after_round(**{**kw, "elapsed_s": 90}) == stop_rules.TIME       # reserve kept back
    assert stop_rules.stop_after_round(**{**kw, "elapsed_s": 60, "last_round_s": 35}) == stop_rules.TIME
    assert stop_rules.stop_after_round(**{**kw, "elapsed_s": 60, "last_round_s": 20}) is None


def test_interval_and_noise_rule():
    best = interval(_timed([1.0, 1.01, 1.02, 1.03, 1.2]).timing)
    assert best == (1.0, 1.03)
    faster = _timed([0.5, 0.51, 0.52, 0.53])
    close = _timed([0.97, 0.99, 1.0, 1.05])               # median below, but inside the noise
    assert clearly_faster(interval(faster.timing), best)
    assert not clearly_faster(interval(close.timing), best)
    ok, why = decide(close, best)
    assert not ok and "noise" in why
    ok, _ = decide(faster, best)
    assert ok                                               # worth a re-run
    ok, why = decide(faster, best, confirm=_timed([0.9, 1.1, 1.2, 1.3]))
    assert not ok and "not confirmed" in why
    ok, why = decide(faster, best, confirm=_timed([0.5, 0.5, 0.51]))
    assert ok and "confirmed" in why
    assert not decide(_timed([0.1, 0.1], Status.suspect), best)[0]     # suspect timings never win


def _h2h(challenger: list[float], champion: list[float], status: Status = Status.ok):
    """A head-to-head in HEAD_TO_HEAD_ORDER with these leg medians (each leg a small spread around it)."""
    from cuda_llm.results import CHALLENGER, HEAD_TO_HEAD_ORDER, HeadToHead

    mine, theirs = iter(challenger), iter(champion)
    legs = []
    for who in HEAD_TO_HEAD_ORDER:
        m = next(mine) if who == CHALLENGER else next(theirs)
        legs.append(_timed([m * 0.998, m, m * 1.004], status if who == CHALLENGER else Status.ok))
    return HeadToHead(challenger="r3c0", champion="r2c1", order=list(HEAD_TO_HEAD_ORDER), legs=legs)


def test_the_head_to_head_keeps_a_2_3_percent_faster_challenger_and_not_a_0_3_percent_one():
    from cuda_llm.graph.selection import head_to_head_decision

    # the sgemm case: the challenger at 2.326 and 2.335 ms, the champion at 2.380 ms: 2.1% faster in one job
    ok, why = head_to_head_decision(_h2h([2.326, 2.335], [2.380, 2.379]))
    assert ok and "won head to head" in why and "2.1% faster" in why, why
    ok, why = head_to_head_decision(_h2h([2.373, 2.374], [2.380, 2.381]))       # 0.3%: inside the noise
    assert not ok and "within noise" in why, why
    ok, why = head_to_head_decision(_h2h([2.30, 2.39], [2.38, 2.385]))           # a leg of the champion as fast
    assert not ok and "not won" in why, why
    ok, why = head_to_head_decision(_h2h([2.00, 2.20], [2.40, 2.41]))           # 9% spread: the gain must exceed it
    assert ok and "noise 9.5%" in why, why
    ok, why = head_to_head_decision(_h2h([1.0, 1.0], [2.0, 2.0], Status.suspect))
    assert not ok and "not a trusted pass (suspect)" in why


def test_pick_fastest_ignores_failures():
    a, b = _timed([2.0, 2.0]), _timed([1.0, 1.0])
    bad = EvalResult(task="t", candidate="x", source_hash="h", status=Status.wrong_answer)
    assert pick_fastest([a, bad, b]) is b
    assert pick_fastest([bad]) is None


def test_reducers_merge_parallel_updates_and_reset():
    cur = merge_cands({}, {"r1c0": {"id": "r1c0", "hash": "a"}})
    cur = merge_cands(cur, {"r1c1": {"id": "r1c1"}})
    cur = merge_cands(cur, {"r1c0": {"status": "ok"}})
    assert cur["r1c0"] == {"id": "r1c0", "hash": "a", "status": "ok"} and "r1c1" in cur
    assert merge_cands(cur, {RESET: True}) == {}
    t = add_tokens({"coder": {"input": 5, "output": 1, "calls": 1}}, {"coder": {"input": 2, "output": 3, "calls": 1},
                                                                     "critic": {"input": 1, "output": 1, "calls": 1}})
    assert t["coder"] == {"input": 7, "output": 4, "calls": 2} and total_tokens(t) == 13


def test_stage_list_is_checked():
    from cuda_llm.graph.build import check_stages
    from cuda_llm.graph.stage_list import default_stages

    class Bad:
        name = "plan"

        def run(self, ctx):
            return {}

    assert [s.name for s in check_stages(default_stages())] == ["evaluate", "tune", "profile"]
    with pytest.raises(ValueError, match="taken"):
        check_stages(default_stages() + [Bad()])
    with pytest.raises(ValueError, match="empty"):
        check_stages([])
