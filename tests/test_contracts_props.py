"""Contracts stated as properties (hypothesis) rather than examples: the timing schedule, the varied shape
cases, the offers and the stop rules. Pure: no torch, no GPU. A failing example is shrunk and printed."""

from __future__ import annotations

from collections import Counter

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cuda_llm.graph import stop_rules as sr  # noqa: E402
from cuda_llm.graph.state import Limits  # noqa: E402
from cuda_llm.tasks.shape_cases import CASES, KEEP_BELOW, SHOWN, halved_case, odd_case, shrink  # noqa: E402
from cuda_llm.tools.harness.timing_plan import Schedule, replay, slot_set  # noqa: E402

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

sets_st = st.lists(st.integers(0, 9), min_size=1, max_size=5, unique=True)


# ---------------------------------------------------------------- the timing schedule
@FAST
@given(seed=st.integers(0, 2**31), sets=sets_st, k=st.integers(1, 3), calls=st.integers(0, 40))
def test_every_set_is_timed_in_every_block_and_every_kept_output_is_of_its_slots_set(seed, sets, k, calls):
    used, kept = replay(seed, calls, sets, k)
    assert len(used) == calls and set(used) <= set(sets)
    n = len(sets)
    for b in range(calls // n):                               # each whole block uses each set once
        assert sorted(used[b * n:(b + 1) * n]) == sorted(sets)
    counts = Counter(used)
    assert max(counts.values(), default=0) - min((counts[s] for s in sets), default=0) <= 1
    for slot, call in kept.items():
        s = slot_set(slot, sets, k)
        assert used[call] == s                                # the slot holds a call of its own set
        assert slot // k == sets.index(s) and 0 <= slot % k < k
    for s in sets:                                            # min(calls of the set, k) slots of it are filled
        filled = [slot for slot in kept if slot_set(slot, sets, k) == s]
        assert len(filled) == min(counts[s], k)
        assert len({kept[slot] for slot in filled}) == len(filled)      # different calls
    # the worker's call-by-call draws are the parent's replay
    sched = Schedule(seed, sets, k)
    assert [sched.next()[0] for _ in range(calls)] == used


@FAST
@given(seed=st.integers(0, 2**31), sets=sets_st, calls=st.integers(0, 20))
def test_no_slots_keep_nothing(seed, sets, calls):
    sched = Schedule(seed, sets, 0)
    assert all(slot is None for _, slot in (sched.next() for _ in range(calls)))


@pytest.mark.parametrize("calls,k", [(6, 1), (9, 2)])
def test_each_call_of_a_set_is_equally_likely_to_be_the_one_checked(calls, k):
    """Over many seeds, the kept outputs of one set fall on each of its calls equally often (a reservoir
    sample): a schedule that favoured the first or the last calls would let a kernel cheat the rest."""
    seeds = 3000
    hits = Counter()
    for seed in range(seeds):
        _, kept = replay(seed, calls, [0], k)
        hits.update(kept.values())
    expected = seeds * k / calls
    assert set(hits) == set(range(calls))
    for call in range(calls):
        assert abs(hits[call] - expected) < 0.12 * expected, (call, hits, expected)


def test_an_empty_schedule_is_refused():
    with pytest.raises(ValueError, match="at least one input set"):
        Schedule(1, [])


# ---------------------------------------------------------------- shape cases
names = st.sampled_from(["N", "M", "K", "batch_size", "dim", "in_features", "out_features", "channels", "a"])
large = st.dictionaries(names, st.integers(64, 1 << 16), min_size=1, max_size=6)
mixed = st.dictionaries(names, st.one_of(st.integers(1, KEEP_BELOW - 1), st.integers(64, 1 << 16)),
                        min_size=1, max_size=6)


@FAST
@given(values=mixed)
def test_shape_cases_are_distinct_smaller_odd_and_held_out_ones_are_never_shown(values):
    cases = [odd_case(values, k) for k in range(CASES)]
    big = {c for c, v in values.items() if v >= KEEP_BELOW}
    for case in cases:
        assert set(case) == big                               # small constants (kernel sizes) stay the file's
        assert all(v % 2 == 1 and 3 <= v < values[c] for c, v in case.items())
        assert len(set(case.values())) == len(case)           # equal sizes made different
    if big:
        keys = [tuple(sorted(c.items())) for c in cases]
        assert len(set(keys)) == CASES                        # every case distinct
        assert not set(keys[SHOWN:]) & set(keys[:SHOWN])      # a held-out case is never a shown one
        bench = {c: values[c] for c in big}
        assert all(c != bench for c in cases)                 # nor the benchmark's


@FAST
@given(values=large)
def test_equal_constants_kept_equal_stay_equal_and_halved_cases_divide_the_file(values):
    for k in range(CASES):
        grouped = odd_case(values, k, keep_equal=True)
        for a in values:
            for b in values:
                if values[a] == values[b]:
                    assert grouped[a] == grouped[b]
        half = halved_case(values, k)
        for c, x in half.items():
            assert values[c] % x == 0 and (x <= 64 or x % 2 == 1)


@FAST
@given(case=st.dictionaries(names, st.integers(1, 5000), min_size=1, max_size=5))
def test_shrink_cuts_the_largest_value_and_keeps_it_odd(case):
    out = shrink(case)
    if out is None:
        assert max(case.values()) <= 3                           # nothing above the floor
        return
    changed = [c for c in case if out[c] != case[c]]
    assert len(changed) == 1
    c = changed[0]
    assert case[c] == max(case.values()) and 3 <= out[c] < case[c]
    if case[c] % 2 == 1:
        assert out[c] % 2 == 1


# ---------------------------------------------------------------- offers
def _catalogue():
    from cuda_llm.feature_db import load_catalogue

    return {f.id: f for f in load_catalogue()}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task=st.sampled_from(["sgemm", "softmax", "reduce_sum", "prefix_sum", "gelu", "nbody", "histogram"]),
       data=st.data())
def test_never_offered_a_feature_the_parent_uses_or_a_set_that_regressed_on_it(task, data):
    from cuda_llm.feature_db import assign_features
    from cuda_llm.feature_db.offers import parent_facts, ranked_offer, refinement_of
    from cuda_llm.tasks import load_task

    cat = _catalogue()
    t = load_task(task).task
    detected = data.draw(st.sets(st.sampled_from(sorted(cat)), max_size=4), label="detected")
    facts = parent_facts(t, "", n_kernels=data.draw(st.integers(1, 3), label="kernels"), detected=detected)
    ranked = ranked_offer(list(cat.values()), [], task=t, facts=facts, arch="sm_90", seed=1)
    ids = [r.feature.id for r in ranked]
    for fid in ids:
        assert fid not in detected or refinement_of(fid, facts) is not None, fid
    if len(ids) < 4:
        return
    n = data.draw(st.integers(1, 4), label="candidates")
    per = data.draw(st.integers(1, 2), label="per candidate")
    free = assign_features(ranked, n, per, seed=1)
    blocked = {frozenset(s) for s in data.draw(st.lists(st.sampled_from(free), max_size=n), label="regressed")}
    sets = assign_features(ranked, n, per, seed=1, blocked=blocked)
    assert not {frozenset(s) for s in sets} & blocked           # a regressed set is never given to it again
    assert all(set(s) <= set(ids) for s in sets)
    assert len({frozenset(s) for s in sets}) == n                # each candidate of the round its own set


# ---------------------------------------------------------------- stop rules
limits_st = st.builds(
    lambda rounds, k, tokens, budget, reserve, fails, sol: Limits(
        max_rounds=rounds, plateau_rounds=k, token_budget=tokens, time_budget_s=budget, reserve_s=reserve,
        max_failed_rounds=fails, sol_target=sol),
    st.integers(1, 30), st.integers(1, 6), st.integers(1, 10**6), st.floats(10, 1e5), st.floats(0, 5),
    st.integers(1, 5), st.one_of(st.none(), st.floats(0.5, 1.0)))


@FAST
@given(budget=limits_st, round_=st.integers(0, 40), plateau=st.integers(0, 20), elapsed=st.floats(0, 2e5),
       tokens=st.integers(0, 2 * 10**6), last=st.floats(0, 1e4), pct=st.one_of(st.none(), st.floats(0, 120)),
       failed=st.integers(0, 8))
def test_the_stop_reason_follows_the_documented_order(budget, round_, plateau, elapsed, tokens, last, pct, failed):
    got = sr.stop_after_round(round_=round_, plateau_count=plateau, elapsed_s=elapsed, tokens=tokens,
                              budget=budget, last_round_s=last, best_pct_of_sol=pct, failed_rounds=failed)
    if tokens >= budget.token_budget:
        expected = sr.TOKENS
    elif elapsed + last >= budget.time_budget_s - budget.reserve_s:
        expected = sr.TIME
    elif budget.sol_target and pct is not None and pct >= 100 * budget.sol_target:
        expected = sr.SPEED_OF_LIGHT
    elif budget.max_failed_rounds and failed >= budget.max_failed_rounds:
        expected = sr.FAILING
    elif plateau >= sr.plateau_patience(budget.plateau_rounds, pct):
        expected = sr.PLATEAU
    elif round_ >= budget.max_rounds:
        expected = sr.MAX_ROUNDS
    else:
        expected = None
    assert got == expected


@FAST
@given(base=st.integers(1, 8), pct=st.floats(0, 150), more=st.floats(0, 50))
def test_the_patience_shrinks_towards_the_speed_of_light_within_its_bounds(base, pct, more):
    p = sr.plateau_patience(base, pct)
    assert 1 <= p <= 2 * base                                        # never more than twice the base
    assert sr.plateau_patience(base, pct + more) <= p               # closer to speed of light: less patience
    assert sr.plateau_patience(base, 50.0) == base and sr.plateau_patience(base, None) == base


@FAST
@given(ref=st.one_of(st.none(), st.floats(0.01, 100)), best=st.one_of(st.none(), st.floats(0.01, 100)),
       count=st.integers(0, 10), thr=st.floats(0, 0.2), passed=st.booleans())
def test_the_plateau_counter_resets_only_on_a_real_improvement(ref, best, count, thr, passed):
    new_ref, n = sr.update_plateau(ref, count, best, thr, round_passed=passed)
    if not passed:
        assert (new_ref, n) == (ref, count)                          # a failed round is not a flat one
    elif best is None:
        assert (new_ref, n) == (ref, count + 1)
    elif ref is None:
        assert (new_ref, n) == (best, 0)
    elif (ref - best) / ref > thr:
        assert (new_ref, n) == (best, 0)
    else:
        assert (new_ref, n) == (ref, count + 1)
    assert sr.update_failed(count, passed) == (0 if passed else count + 1)
