"""The edges of the loop's and the judge's rules that a mutation run found unpinned (docs/mutation.md): each
test here kills mutants that survived the module's other tests, at the exact boundary a rule states. Pure,
no torch, no GPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np

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


# ---------------------------------------------------------------- tasks.import_limits
def test_memory_sizes_parse_in_every_unit_and_bad_ones_are_refused():
    from cuda_llm.tasks.import_limits import parse_memory

    assert parse_memory("100") == 100 and parse_memory("100B") == 100 and parse_memory("100b") == 100
    assert parse_memory("1K") == 1024 and parse_memory("1KB") == 1024
    assert parse_memory("512M") == 512 << 20 and parse_memory("512MB") == 512 << 20
    assert parse_memory("8G") == 8 << 30 and parse_memory("16GB") == 16 << 30 and parse_memory(" 1.5g ") == 3 << 29
    assert parse_memory("2T") == 2 << 40 and parse_memory("1TB") == 1 << 40 and parse_memory(".5K") == 512
    for bad in ("0", "0G", "-1G", "8X", "", "G", "1.2.3G", None):
        with pytest.raises(ValueError, match="write a size such as 8G"):
            parse_memory(bad)


def test_byte_counts_read_in_the_largest_unit():
    from cuda_llm.tasks.import_limits import human_bytes

    assert human_bytes(0) == "0 B" and human_bytes(512) == "512 B" and human_bytes(1023.7) == "1023 B"
    assert human_bytes(1024) == "1.0 KB" and human_bytes(1.5 * (1 << 20)) == "1.5 MB"
    assert human_bytes(3 << 30) == "3.0 GB" and human_bytes(5 << 40) == "5120.0 GB"


def test_failure_classes_clipping_and_defaults_without_torch(monkeypatch):
    """The torch-free form of test_torch_kernelbench's failure classes (import_limits is pure)."""
    from cuda_llm.tasks import import_limits as il

    class OutOfMemoryError(RuntimeError):
        pass

    alloc = "DefaultCPUAllocator: not enough memory: you tried to allocate 8589934592 bytes."
    assert il.is_allocation_failure(RuntimeError(alloc)) and il.is_allocation_failure(MemoryError())
    assert il.is_allocation_failure(OutOfMemoryError("x")) and il.is_allocation_failure(RuntimeError("std::bad_alloc"))
    assert not il.is_allocation_failure(ValueError(alloc))                 # only an allocator's RuntimeError
    assert not il.is_allocation_failure(RuntimeError("shape mismatch"))
    assert not il.is_dtype_error(RuntimeError(alloc)) and not il.is_dtype_error(ValueError("dtype"))
    assert il.is_dtype_error(RuntimeError("expected m1 and m2 to have the same dtype, but got: double != float"))
    assert il.is_dtype_error(NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Half'"))
    assert il.is_dtype_error(TypeError("type mismatch"))
    assert not il.is_dtype_error(RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)"))
    assert il.clip("a  b\n c") == "a b c" and il.clip("x" * 240) == "x" * 240
    text = il.clip("you tried to allocate, " * 30, 60)
    assert text.endswith(" ...") and len(text) <= 64 and not text[:-4].endswith(",")
    assert text[:-4] == "you tried to allocate, " * 2 + "you tried to"
    assert il.error_line(ValueError("bad\nthing")) == "ValueError: bad thing"
    assert il.error_line(ValueError("y " * 200), 20).endswith(" ...")
    at_limit = ValueError("z" * (240 - len("ValueError: ")))                  # 240 characters: whole
    assert il.error_line(at_limit) == f"ValueError: {at_limit}"
    assert il.error_line(ValueError("z " * 114 + "z")).endswith(" ...")      # 241: clipped
    assert il.clip("w " * 120 + "w").endswith(" ...") and il.clip("w " * 119 + "ww") == "w " * 119 + "ww"
    limits = il.ImportLimits(max_memory=1 << 30)
    assert limits.max_seconds == 120.0 and limits.device == "cpu"
    monkeypatch.setattr(il, "available_memory", lambda: 10 << 30)
    assert il.default_max_memory() == 5 << 30                              # half of what is available
    monkeypatch.setattr(il, "available_memory", lambda: 1 << 29)
    assert il.default_max_memory() == 1 << 30                              # never below 1 GB
    monkeypatch.setattr(il, "available_memory", lambda: None)
    assert il.default_max_memory() == 4 << 30                              # unknown: 4 GB


def test_available_memory_reads_memavailable(monkeypatch):
    import builtins
    import io

    from cuda_llm.tasks import import_limits as il

    real_open = builtins.open
    meminfo = "MemTotal:       16000 kB\nMemFree:         5000 kB\nMemAvailable:    7000 kB\nBuffers: 1 kB\n"
    monkeypatch.setattr(builtins, "open", lambda path, *a, **k: io.StringIO(meminfo) if str(path) == "/proc/meminfo"
                        else real_open(path, *a, **k))
    assert il.available_memory() == 7000 * 1024


def test_available_memory_falls_back_to_physical_memory(monkeypatch):
    import builtins

    from cuda_llm.tasks import import_limits as il

    real_open = builtins.open

    def no_proc(path, *a, **k):
        if str(path) == "/proc/meminfo":
            raise OSError("no /proc here")
        return real_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", no_proc)
    import os

    assert il.available_memory() == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


# ---------------------------------------------------------------- tasks.shape_cases
def test_odd_cases_exact_values_at_every_rule():
    from cuda_llm.tasks import shape_cases as sc

    assert (sc.CASES, sc.SHOWN, sc.KEEP_BELOW) == (6, 4, 9)                  # 4 shown, 2 held out
    big = {"N": 4096, "M": 4096, "K": 8192}
    assert sc.odd_case(big, 0) == {"N": 37, "M": 39, "K": 41}               # the case's base + 2 j
    assert sc.odd_case(big, 1) == {"N": 19, "M": 21, "K": 23}
    assert [sc.odd_case({"a": 1000}, k)["a"] for k in range(12)] == [37, 19, 53, 27, 45, 23, 31, 41, 37, 19, 53, 27]
    assert sc.odd_case({"a": 37}, 0) == {"a": 35}                           # never the file's own value
    # below the base: the odd values under the constant, in turn
    assert [sc.odd_case({"a": 10}, k) for k in range(6)] == [{"a": 9}, {"a": 7}, {"a": 5}, {"a": 3}, {"a": 9}, {"a": 7}]
    assert sc.odd_case({"a": 9}, 0) == {"a": 7} and sc.odd_case({"a": 8}, 0) == {}   # 9 varies, 8 stays
    # two constants that would take the same value: the later one steps down, never below 3
    assert sc.odd_case({"a": 9, "b": 10}, 0) == {"a": 7, "b": 5}
    assert sc.odd_case({"a": 9, "b": 10}, 1) == {"a": 5, "b": 3}
    assert sc.odd_case({"a": 9, "b": 10}, 2) == {"a": 3, "b": 3}
    assert sc.odd_case({"a": 9, "kernel": 3, "b": 200}, 0) == {"a": 7, "b": 41}   # j counts every constant
    grouped = sc.odd_case({"ch": 64, "groups": 64, "n": 100}, 0, keep_equal=True)
    assert grouped["ch"] == grouped["groups"] == 37 and grouped["n"] == 39      # j over the representatives


def test_halved_cases_exact_values_at_every_rule():
    from cuda_llm.tasks import shape_cases as sc

    big = {"N": 4096, "M": 4096, "K": 8192}
    assert [sc.halved_case(big, k) for k in range(3)] == [{"N": 64, "M": 32, "K": 16}, {"N": 32, "M": 16, "K": 64},
                                                          {"N": 16, "M": 64, "K": 32}]
    assert sc.halved_case(big, 0, again=False) == {"N": 64, "M": 64, "K": 64}
    assert sc.halved_case({"a": 64}, 0) == {"a": 64} and sc.halved_case({"a": 128}, 0) == {"a": 64}
    assert sc.halved_case({"a": 96}, 0) == {"a": 48} and sc.halved_case({"a": 200}, 0) == {"a": 50}
    assert sc.halved_case({"a": 16}, 2) == {"a": 4} and sc.halved_case({"a": 12}, 2) == {"a": 6}   # not below 4
    assert sc.halved_case({"a": 9}, 2) == {"a": 9} and sc.halved_case({"a": 8}, 0) == {}
    assert sc.halved_case({"k": 3, "a": 64}, 0) == {"a": 32}                 # j counts every constant
    grouped = sc.halved_case(big, 0, keep_equal=True)
    assert grouped["N"] == grouped["M"] == 64 and grouped["K"] == 32


def test_shrink_exact_values_at_every_rule():
    from cuda_llm.tasks.shape_cases import shrink

    assert shrink({"a": 37, "b": 20}) == {"a": 21, "b": 20}
    assert shrink({"a": 4}) == {"a": 3} and shrink({"a": 3}) is None and shrink({"a": 2, "b": 1}) is None
    assert shrink({"a": 7}) == {"a": 3}                                     # 4 is even: one less, still >= 3
    assert shrink({"a": 9}, floor=6) == {"a": 7}                            # 6 even, 5 below the floor: one more
    assert shrink({"a": 5}, floor=4) is None                                 # that would be 5 again
    assert shrink({"a": 100, "b": 100}) in ({"a": 60, "b": 100}, {"a": 100, "b": 60})
    assert shrink({"a": 10}) == {"a": 6}


# ---------------------------------------------------------------- graph.planning
TWO_KERNELS = """
#include <cuda_runtime.h>
__global__ void a(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }
__global__ void b(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }
extern "C" void solve(const float* A, const float* B, float* C, int M, int N, int K) {
    a<<<(M + 255) / 256, 256>>>(C, M);
    b<<<(M + 255) / 256, 256>>>(C, M);
}
"""


def _plan_deps(tmp_path, task: str = "sgemm"):
    from types import SimpleNamespace

    from cuda_llm.feature_db import load_catalogue
    from cuda_llm.runs.rundir import RunDir
    from cuda_llm.tasks import load_task

    loaded = load_task(task)
    events: list[tuple[str, dict]] = []
    deps = SimpleNamespace(rundir=RunDir.create(tmp_path / "runs", task), loaded=loaded, task=loaded.task,
                           catalogue=load_catalogue(), device=None, stats=None, arch="sm_90", models=None,
                           event=lambda what, **f: events.append((what, f)))
    return deps, events


def _put(deps, rel: str, text: str) -> None:
    p = Path(deps.rundir.root) / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_recommendations_and_the_offers_order(tmp_path):
    import json

    from cuda_llm.agents.context import CritiqueBrief
    from cuda_llm.graph import planning

    deps, events = _plan_deps(tmp_path)
    src = Path(deps.loaded.task.baseline_path).read_text()
    _put(deps, "candidates/r1c0.cu", src)
    _put(deps, "critiques/r1c0.json", CritiqueBrief(candidate="r1c0", next_features=["cp_async", "split_k"]).model_dump_json())
    _put(deps, "profiles/r1c0.json", json.dumps({"diagnosis": {"suggested_features": ["cp_async", "vector_loads"]}}))
    recs = planning.recommendations(deps, "r1c0")
    assert recs == {"cp_async": ["the critic", "the diagnosis"], "split_k": ["the critic"],
                    "vector_loads": ["the diagnosis"]}
    _put(deps, "critiques/r1c1.json", CritiqueBrief(candidate="r1c1", next_features=["cp_async"], by="rules").model_dump_json())
    assert planning.recommendations(deps, "r1c1") == {"cp_async": ["the rules"]}
    assert planning.recommendations(deps, "r9c9") == {}
    offered = planning.offer(deps, 2, "r1c0")
    ids = [o.feature for o in offered] if hasattr(offered[0], "feature") else [o.id for o in offered]
    assert ids[0] == "cp_async" and "split_k" not in ids                    # 4096^2 outputs: split-K cannot help
    groups = [0 if set(o.recommended_by) & {"the critic", "the rules"} else 1 if o.recommended_by else 2 for o in offered]
    assert groups == sorted(groups) and groups[0] == 0 and 1 in groups and 2 in groups
    said = [f for k, f in events if k == "decision" and f.get("kind") == "not_offered"]
    assert len(said) == 1 and said[0]["round"] == 2 and said[0]["parent"] == "r1c0"
    assert list(said[0]["features"]) == ["split_k"] and "needs:" in said[0]["features"]["split_k"]
    assert len(ids) == len(set(ids)) > 5


def test_the_bandit_plan_gives_every_slot_of_a_parent_its_own_set(tmp_path):
    from cuda_llm.graph import planning

    deps, _ = _plan_deps(tmp_path)
    _put(deps, "candidates/r1c0.cu", Path(deps.loaded.task.baseline_path).read_text())
    parents = [{"parent": "r1c0"}, {"parent": "r1c0"}, {"parent": ""}]
    plan = planning.bandit_plan(deps, 2, 2, parents)
    assert len(plan) == 3 and all(len(p) == 2 for p in plan)
    assert frozenset(plan[0]) != frozenset(plan[1])
    assert planning.ranked_for(deps, 2, "r1c0", top=None)                     # no statistics: a ranking still

    class Broken:
        def __iter__(self):
            raise OSError("statistics unreadable")

        def __getattr__(self, name):
            raise OSError("statistics unreadable")

    deps.stats = Broken()
    events: list = []
    deps.event = lambda what, **f: events.append((what, f))
    ranked = planning.ranked_for(deps, 2, "r1c0", top=None)
    assert ranked and any(k == "warning" and f.get("where") == "rank_features" for k, f in events)


def test_the_parents_own_facts(tmp_path):
    from cuda_llm.graph import planning

    deps, _ = _plan_deps(tmp_path)
    _put(deps, "candidates/r1c0.cu", TWO_KERNELS)
    base = planning.parent_facts(deps, "")
    assert base.kernels == 1 and base.kernels_from == "source" and not base.has("shared_memory")
    own = planning.parent_facts(deps, "r1c0")
    assert own.kernels == 2 and own.has("multi_kernel")                      # its own source, not the baseline's
    assert planning.free_slots(1, 0, 1) == set()


def test_failed_ideas_at_the_threshold_and_fit_to_more_slots_than_parents(tmp_path):
    from cuda_llm.agents.planner import CandidatePlan
    from cuda_llm.graph import planning
    from cuda_llm.graph.state import Candidate

    def cand(cid, feats, status, ms, parent_ms, parent="baseline"):
        return Candidate(id=cid, round=1, slot=0, parent=parent, parent_ms=parent_ms, features=feats, status=status,
                         ms=ms)

    assert planning.failed_ideas([cand("r1c0", ["a"], "ok", 1.05, 1.0)]) == {}          # exactly 1.05x: not yet
    assert planning.failed_ideas([cand("r1c0", ["a"], "ok", 2.05, 2.0)]) == {}          # 1.025x
    assert planning.failed_ideas([cand("r1c0", ["a"], "wrong_answer", 0.5, 1.0)]) == {"baseline": {frozenset({"a"})}}
    assert planning.failed_ideas([cand("r1c0", ["a"], "ok", None, 1.0)]) == {"baseline": {frozenset({"a"})}}
    deps, _ = _plan_deps(tmp_path)
    _put(deps, "candidates/r1c0.cu", Path(deps.loaded.task.baseline_path).read_text())
    _put(deps, "rounds/r1/candidates.json", "[" + cand("r1c0", ["cp_async"], "wrong_answer", None, 1.0).model_dump_json()
         + "]")
    plans = [CandidatePlan(features=["made_up_feature"], idea="1"), CandidatePlan(features=["cp_async"], idea="2"),
             CandidatePlan(features=["cp_async"], idea="3")]
    notes = planning.fit_to_parents(deps, 2, plans, [{"parent": "r1c0"}, {"parent": "baseline"}])
    assert plans[0].features == ["made_up_feature"]                          # not in the catalogue: kept as named
    assert plans[1].features == [] and plans[2].features == []               # slot 2 takes the last parent's
    assert len(notes) == 2
    jobs = planning.jobs_for(deps, 2, plans, [{"parent": "r1c0"}], by="rules")
    assert [j["attempt"] for j in jobs] == [0, 0, 0] and [j["parent"] for j in jobs] == ["r1c0"] * 3


# ---------------------------------------------------------------- feature_db.offers
# what each suite task's shape and family make true (offers.task_facts), read one by one: an elementwise GELU
# and a max-pool have nothing to reduce or reuse, a sort scans, a transpose only transposes
TASK_FACTS = {
    'attention': {'softmax', 'input_reuse', 'long_reduction', 'matrix_product', 'reduces'},
    'conv2d': {'long_reduction', 'matrix_product', 'reduces', 'input_reuse'},
    'cross_entropy': {'softmax', 'few_outputs', 'rows', 'long_reduction', 'reduces'},
    'gelu': set(),
    'gemv': {'few_outputs', 'rows', 'input_reuse', 'long_reduction', 'reduces'},
    'hgemm': {'long_reduction', 'matrix_product', 'reduces', 'input_reuse'},
    'histogram': {'long_reduction', 'scatter', 'few_outputs', 'reduces'},
    'kmeans_assign': {'input_reuse', 'long_reduction', 'matrix_product', 'reduces', 'distances'},
    'layernorm': {'rows', 'reduces'},
    'maxpool2d': set(),
    'nbody': {'long_reduction', 'few_outputs', 'reduces', 'input_reuse'},
    'prefix_sum': {'reduces', 'prefix'},
    'reduce_sum': {'long_reduction', 'few_outputs', 'reduces'},
    'rmsnorm': {'rows', 'reduces'},
    'sgemm': {'long_reduction', 'matrix_product', 'reduces', 'input_reuse'},
    'softmax': {'softmax', 'rows', 'reduces'},
    'sort_u32': {'sorting', 'prefix'},
    'spmv_csr': {'rows', 'reduces'},
    'stencil2d': {'input_reuse'},
    'transpose': {'transposes'},
}


def test_each_suite_tasks_facts():
    from cuda_llm.feature_db.offers import task_facts
    from cuda_llm.tasks import list_task_names, load_task

    assert set(list_task_names()) >= set(TASK_FACTS)
    for name, want in TASK_FACTS.items():
        assert task_facts(load_task(name).task) == want, name
    assert "few_outputs" not in task_facts(load_task("gemv").task, sm_count=4)       # 16k rows fill 4 SMs


# ---------------------------------------------------------------- feature_db.credit
def test_the_headroom_closed_exactly():
    from cuda_llm.feature_db.credit import headroom_closed

    assert headroom_closed(10.0, 6.0, 2.0) == pytest.approx(0.5)            # 4 of the 8 ms of headroom
    assert headroom_closed(10.0, 6.0, None) == pytest.approx(0.4)           # no bound: a share of the time
    assert headroom_closed(10.0, 6.0, 0.0) == pytest.approx(0.4) and headroom_closed(10.0, 6.0, -1.0) == pytest.approx(0.4)
    assert headroom_closed(10.0, 1.0, 5.0) == 1.0                           # clipped at the whole headroom
    assert headroom_closed(10.0, 30.0, 5.0) == -1.0                         # a regression counts down to -1
    assert headroom_closed(10.0, 9.9, 9.9) == pytest.approx(0.2)            # within 5% of the bound: 5% of 10 ms
    assert headroom_closed(10.0, 10.0, 2.0) == 0.0
    for bad in ((0.0, 1.0), (1.0, 0.0), (-1.0, 1.0)):
        with pytest.raises(ValueError, match="times must be positive"):
            headroom_closed(*bad, None)


def test_credit_goes_to_new_detected_features_and_compliance_is_counted():
    from cuda_llm.feature_db.credit import Credit, StepOutcome, credit_step

    ok = StepOutcome(compiled=True, passed=True, ms=6.0, parent_ms=10.0, sol_ms=2.0)
    c = credit_step(["a", "b", "a", "c"], {"a", "x", "old"}, {"old"}, ok)
    assert c.asked == ["a", "b", "c"] and c.credited == ["a", "x"] and c.complied == ["a"] and c.absent == ["b", "c"]
    assert c.headroom_closed == pytest.approx(0.5) and c.reward_per_feature == pytest.approx(0.25)
    assert c.speedup_over_parent == pytest.approx(10 / 6) and c.compliance == pytest.approx(1 / 3)
    nothing_new = credit_step(["old"], {"old"}, {"old"}, ok)
    assert nothing_new.credited == [] and nothing_new.reward_per_feature is None and nothing_new.compliance == 1.0
    assert nothing_new.headroom_closed == pytest.approx(0.5)
    for failed in (StepOutcome(compiled=True, passed=False, ms=6.0, parent_ms=10.0),
                   StepOutcome(compiled=True, passed=True, ms=None, parent_ms=10.0),
                   StepOutcome(compiled=True, passed=True, ms=6.0, parent_ms=None)):
        f = credit_step(["a"], {"a"}, set(), failed)
        assert f.credited == ["a"] and f.headroom_closed is None and f.reward_per_feature is None
        assert f.speedup_over_parent is None
    assert Credit().compliance is None


# ---------------------------------------------------------------- tools.bounds.speed_of_light
def test_the_small_rules_of_the_speed_of_light():
    from cuda_llm.tools.bounds import speed_of_light as sol

    assert sol.unit_label(None) == "no compute" and sol.unit_label("fp32") == "fp32 FMA"
    assert sol.unit_label("fp16x2") == "packed-half FMA (HFMA2)" and sol.unit_label("tf32-tensor") == "tf32 tensor-core"
    assert sol.pct_of_sol(2.0, 4.0) == 50.0 and sol.pct_of_sol(None, 4.0) is None and sol.pct_of_sol(2.0, 0.0) is None
    assert sol.SUSPECT_MARGIN == 0.8
    assert sol.below_sol(0.79, 1.0) and not sol.below_sol(0.8, 1.0) and not sol.below_sol(0.5, None)
    assert sol.below_sol(0.89, 1.0, margin=0.9) and not sol.below_sol(0.9, 1.0, margin=0.9)
    from cuda_llm.tasks import load_task

    task = load_task("gelu").task
    assert sol.bound(task, dict(task.benchmark), None) is None
    assert sol.sol_ms(task, dict(task.benchmark), None) is None


def test_the_offer_order_does_not_depend_on_the_ranking_and_says_why(tmp_path, monkeypatch):
    import json

    from cuda_llm.agents.context import CritiqueBrief
    from cuda_llm.graph import planning

    deps, events = _plan_deps(tmp_path)
    _put(deps, "candidates/r1c0.cu", Path(deps.loaded.task.baseline_path).read_text())
    _put(deps, "critiques/r1c0.json", CritiqueBrief(candidate="r1c0", next_features=["cp_async"]).model_dump_json())
    _put(deps, "profiles/r1c0.json", json.dumps({"diagnosis": {"suggested_features": ["vector_loads"]}}))
    real = planning.ranked_for
    monkeypatch.setattr(planning, "ranked_for", lambda *a, **k: list(reversed(real(*a, **k))))
    offered = planning.offer(deps, 2, "r1c0")
    ids = [o.feature if hasattr(o, "feature") else o.id for o in offered]
    assert ids[:2] == ["cp_async", "vector_loads"]                       # the critic's, then the diagnosis's
    assert not any("refinement" in (o.reason or "") for o in offered)    # nothing the parent uses here
    assert not [f for k, f in events if f.get("kind") == "not_offered"]   # nothing dropped: nothing said


def test_the_bandit_plan_skips_a_set_that_failed_on_the_baseline_and_draws_from_enough_features(tmp_path, monkeypatch):
    from cuda_llm.graph import planning
    from cuda_llm.graph.state import Candidate

    deps, _ = _plan_deps(tmp_path)
    first = planning.bandit_plan(deps, 2, 2, [{"parent": ""}])[0]
    failed = Candidate(id="r1c0", round=1, slot=0, parent="baseline", parent_ms=1.0, features=first,
                       status="wrong_answer")
    _put(deps, "rounds/r1/candidates.json", "[" + failed.model_dump_json() + "]")
    again = planning.bandit_plan(deps, 2, 2, [{"parent": ""}])[0]
    assert frozenset(again) != frozenset(first) and len(again) == 2
    tops: list = []
    real = planning.ranked_for
    monkeypatch.setattr(planning, "ranked_for", lambda *a, **k: tops.append(k["top"]) or real(*a, **k))
    many = planning.bandit_plan(deps, 2, 2, [{"parent": "baseline"}] * 6)
    assert len(many) == 6 and all(many)
    assert tops == [12]                                  # six slots of two: twelve features to draw from, not ten
    planning.bandit_plan(deps, 2, 2, [{"parent": "baseline"}] * 2)
    assert tops[-1] == planning.BANDIT_OFFER


def test_the_parents_facts_follow_the_gpus_size(tmp_path):
    from types import SimpleNamespace

    from cuda_llm.graph import planning

    deps, _ = _plan_deps(tmp_path, "gemv")
    assert planning.parent_facts(deps, "").has("few_outputs")
    deps.device = SimpleNamespace(sm_count=4)
    assert not planning.parent_facts(deps, "").has("few_outputs")


def test_a_broken_statistics_warning_is_short(tmp_path):
    from cuda_llm.graph import planning

    deps, _ = _plan_deps(tmp_path)

    class Broken:
        def __iter__(self):
            raise OSError("x" * 1000)

        def __getattr__(self, name):
            raise OSError("x" * 1000)

    deps.stats = Broken()
    events: list = []
    deps.event = lambda what, **f: events.append((what, f))
    planning.ranked_for(deps, 2, "", top=None)
    errors = [f["error"] for k, f in events if k == "warning"]
    assert errors and all(len(e) <= 300 for e in errors)


# ---------------------------------------------------------------- tools.harness.worker_protocol
def test_the_worker_protocols_lines_and_defaults():
    import math

    from cuda_llm.tools.harness import worker_protocol as wp

    assert (wp.EXIT_OK, wp.EXIT_CUDA_FAULT, wp.EXIT_HARNESS) == (0, 3, 4)      # the exit codes both sides read
    assert wp.GUARD_BYTES == 1024 and wp.GUARD_BYTE == 0xA5
    line = wp.encode({"ev": "t", "ms": 1.5, "dir": Path("/x")})
    assert line == b'{"ev":"t","ms":1.5,"dir":"/x"}\n'                         # compact, one line, paths as text
    assert wp.decode(line) == {"ev": "t", "ms": 1.5, "dir": "/x"} and wp.decode(line.decode()) == wp.decode(line)
    for bad in (b"", b"not json", b"[1, 2]", b"3", None):
        assert wp.decode(bad) is None
    c = wp.TimeCommand(sizes={"n": 1}, sets={}, dirs={}, schedule_seed=5)
    assert (c.timed_sets, c.post_set, c.slots_per_set, c.blank_every) == ([0, 1, 2], 3, 1, 2)
    with pytest.raises(ValueError):
        wp.TimeCommand(sizes={}, sets={}, dirs={}, schedule_seed=1, blank_every=0)
    with pytest.raises(ValueError):
        wp.RunOnceRequest(so_path="a", task_folder="b", sizes={}, repeat=0)
    assert wp.RunOnceRequest(so_path="a", task_folder="b", sizes={}).repeat == 1
    assert wp.RunOnceRequest(so_path="a", task_folder="b", sizes={}).seed == 0
    assert wp.CaseSpec(sizes={"n": 3}).held_out is False
    r = wp.EvaluateResponse(hidden_median_ms=float("nan"), notes=["x"])
    text = wp.dump_json(r)
    assert "NaN" in text and math.isnan(wp.EvaluateResponse.model_validate_json(text).hidden_median_ms)
    assert wp.EvaluateResponse().seconds == 0.0 and wp.EvaluateResponse().benchmark_data_s == 0.0
    assert wp.ClockCheck().calls == 0 and wp.WorkerError(status="wrong_answer", message="m").stage == ""


def test_credit_for_kernels_faster_than_a_millisecond():
    from cuda_llm.feature_db.credit import StepOutcome, credit_step

    c = credit_step(["a"], {"a"}, set(), StepOutcome(compiled=True, passed=True, ms=0.25, parent_ms=0.5, sol_ms=None))
    assert c.headroom_closed == pytest.approx(0.5) and c.reward_per_feature == pytest.approx(0.5)
    assert c.speedup_over_parent == pytest.approx(2.0)


def test_the_bounds_sentence_for_each_unit_and_no_flops():
    from cuda_llm.results import DeviceInfo, SassSummary
    from cuda_llm.tasks import load_task
    from cuda_llm.tools.bounds import speed_of_light as sol

    h100 = DeviceInfo(name="H100", arch="sm_90", compute_capability=(9, 0), sm_count=132, peak_bandwidth_gbs=3000.0,
                      peak_fp32_gflops=60000.0, peak_fp16_tc_gflops=750000.0, peak_tf32_tc_gflops=375000.0,
                      tensor_peak_method="wgmma sm_90a", measurement_version=2)
    bare = h100.model_copy(update={"peak_fp16_tc_gflops": None, "peak_tf32_tc_gflops": None})
    transpose = load_task("transpose").task
    t = sol.bound(transpose, dict(transpose.benchmark), h100)
    assert t.compute_ms is None and t.unit is None and t.limiter == "memory" and t.ms == t.memory_ms
    assert "counts no floating-point work, so only bytes bound it" in t.basis
    assert t.pct(2 * t.ms) == pytest.approx(50.0)
    tiny = sol.bound(transpose, {k: 64 for k in transpose.benchmark}, h100)
    assert tiny.ms == tiny.memory_ms < 1.0                                   # a tiny shape: well under 1 ms
    hgemm = load_task("hgemm").task
    packed = sol.bound(hgemm, dict(hgemm.benchmark), h100, sass=SassSummary(opcodes={"HFMA2": 10}, packed_half=10))
    assert "packed-half arithmetic (HFMA2) and no tensor-core instructions" in packed.basis
    tc = SassSummary(tensor={"fp16": 8})
    no_peak = sol.bound(hgemm, dict(hgemm.benchmark), bare, sass=tc, library=True)
    assert no_peak.compute_ms is None and "no measured peak for the units it may use, so the bound" in no_peak.basis
    lib = sol.bound(hgemm, dict(hgemm.benchmark), bare, library=True)
    assert lib.compute_ms is None and "no measured peak for the units it may use (" in lib.basis


# ---------------------------------------------------------------- graph.postmortem
def test_the_cause_paragraph_at_its_edges():
    from cuda_llm.graph import postmortem as pm

    assert pm.MAX_CAUSE_CHARS == 360
    long = pm.cause_text(pm.BENCHMARK_FAILURE, parent="p", failure="x" * 1000)
    assert len(long) == 360 and long.endswith("x...")                       # cut to the limit exactly
    head = "passed the correctness cases, then failed at the benchmark shape: "
    exact = pm.cause_text(pm.BENCHMARK_FAILURE, parent="p", failure="y" * (360 - len(head) - 1))
    assert len(exact) == 360 and exact.endswith("y.")                        # at the limit: whole
    assert pm.cause_text(pm.BENCHMARK_FAILURE, parent="p", ratio=2.0).startswith("passed the correctness cases")
    assert "passed" not in pm.cause_text(pm.SLOWER, parent="p", ratio=None) and \
        pm.cause_text(pm.SLOWER, parent="p", ratio=None) == "."
    d = {"bottleneck": "memory-bound", "summary": "Reads dominate. More text here.",
         "losses": [{"rule": "dram", "share_pct": 0}], "evidence": ["dram 80% of peak"]}
    assert pm.cause_text(pm.SLOWER, parent="p", ratio=2.0, diagnosis=d) == \
        "2.0x slower than its parent p; memory-bound: Reads dominate."
    assert pm._first_sentence("A b. C d.") == "A b." and pm._first_sentence("No stop") == "No stop"
    assert pm._first_sentence(". x") == "." and pm._first_sentence("  a\n b.  c") == "a b."
    pmr = pm.PostMortem(candidate="r1c0", round=1, parent="baseline", outcome=pm.SLOWER, status="ok", cause="c")
    assert pmr.profiled is False and pmr.features == []


# ---------------------------------------------------------------- tools.harness.checker
def test_the_first_change_of_an_input_with_and_without_chunks():
    from types import SimpleNamespace

    import numpy as np

    from cuda_llm.tools.harness.checker import _first_change

    before = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert _first_change(before, before.copy()) is None
    assert _first_change(before, before.reshape(-1).copy()) is None           # same size, flat: compared as shaped
    changed = before.copy()
    changed[2, 1] = -1
    assert _first_change(before, changed) == [2, 1]
    assert _first_change(before, np.zeros(13, np.float32)) == []              # another size: no index to name
    assert _first_change(before, before.astype(np.float64)) == []             # another dtype
    # a derived set: the base with two runs of two written in
    chunks = SimpleNamespace(starts=[1, 8], length=2, values=np.array([50, 51, 80, 81], dtype=np.float32))
    given = before.reshape(-1).copy()
    given[1:3] = [50, 51]
    given[8:10] = [80, 81]
    assert _first_change(before, given.reshape(3, 4), chunks) is None
    wrong_run = given.copy()
    wrong_run[9] = 0
    assert _first_change(before, wrong_run.reshape(3, 4), chunks) == [2, 1]   # element 9 of the second run
    wrong_base = given.copy()
    wrong_base[10] = -5                                                       # just past the second run
    assert _first_change(before, wrong_base.reshape(3, 4), chunks) == [2, 2]
    wrong_first = given.copy()
    wrong_first[0] = 7                                                        # before the first run
    assert _first_change(before, wrong_first.reshape(3, 4), chunks) == [0, 0]


def test_a_parents_source_facts_and_the_cold_prior():
    from cuda_llm.feature_db import offers
    from cuda_llm.tasks import load_task

    task = load_task("gelu").task
    plain = "__global__ void k(float* x) { x[0] = x[0] + 1.0f; }\nextern \"C\" void solve(float* x) { k<<<1, 1>>>(x); }"
    f = offers.parent_facts(task, plain)
    assert not f.has("math_functions") and not f.has("shared_memory") and not f.has("allocates")
    math = plain.replace("x[0] + 1.0f", "tanhf(x[0])")
    assert offers.parent_facts(task, math).has("math_functions")
    shared = plain.replace("{ x[0]", "{ __shared__ float s[32]; x[0]")
    assert offers.parent_facts(task, shared).has("shared_memory")
    assert offers.parent_facts(task, plain, shared_bytes=4096).has("shared_memory")      # ptxas saw shared memory
    commented = plain.replace("x[0] = x[0]", "/* tanhf(x) __shared__ */ x[0] = x[0]")
    assert not offers.parent_facts(task, commented).has("math_functions")
    assert offers.parent_facts(task, plain.replace("k<<<1, 1>>>(x);", "cudaMalloc(&p, 4); k<<<1, 1>>>(x);")).has("allocates")
    prior = offers.cold_prior(["a", "b"], ["b", "c"])
    assert prior == {"a": offers.KNOWN_WIN_PRIOR, "b": offers.SUGGESTED_PRIOR, "c": offers.SUGGESTED_PRIOR}
    assert offers.SUGGESTED_PRIOR > offers.KNOWN_WIN_PRIOR > 0
    assert offers.OfferRules().needs == [] and offers.OfferRules().refinement is None
    with pytest.raises(ValueError):          # frozen: the rules read from offers.toml are shared by every call
        offers.OfferRules().refinement = "x"
    with pytest.raises(ValueError):
        offers.OfferRules(unknown=1)         # a typo in offers.toml is an error, not a rule silently ignored
    with pytest.raises(ValueError):
        f.kernels = 3


def test_launch_sites_count_every_way_of_launching():
    from cuda_llm.feature_db.offers import launch_sites

    assert launch_sites("") == (0, False)
    assert launch_sites("void s() { cudaLaunchKernel((void*)k, g, b, a, 0, 0); }") == (1, False)
    assert launch_sites("void s() { cudaGraphLaunch(g, 0); k<<<1, 1>>>(x); }") == (2, False)
    assert launch_sites("void s() { while (n--) cudaLaunchKernel((void*)k, g, b, a, 0, 0); }") == (1, True)
    two = "void s() { k1<<<1, 1>>>(x); for (int i = 0; i < 3; ++i) { y += i; } k2<<<1, 1>>>(x); }"
    assert launch_sites(two) == (2, False)                               # a loop between launches holds none
    inner = "void s() { for (int i = 0; i < 3; ++i) { if (i) { k<<<1, 1>>>(x); } } }"
    assert launch_sites(inner) == (1, True)                              # nested inside the loop's body
    after = "void s() { for (int i = 0; i < 3; ++i) { y += i; }\n k<<<1, 1>>>(x); }"
    assert launch_sites(after) == (1, False)


# ---------------------------------------------------------------- tools.harness.validate
def test_large_outputs_are_checked_in_whole_chunks_on_the_pool(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from cuda_llm.tools.harness import validate

    monkeypatch.setattr(validate, "CHUNK", 8)               # small chunks: the large-output path on small arrays
    with ThreadPoolExecutor(4) as pool:
        blocks = lambda n, p=pool: validate._over_blocks(lambda lo, hi: (lo, hi), n, p)   # noqa: E731
        assert blocks(32) == [(0, 32)]                     # up to 4 chunks: one block
        assert validate._over_blocks(lambda lo, hi: (lo, hi), 1000, None) == [(0, 1000)]   # no pool: one block
        assert blocks(33) == [(0, 24), (24, 33)]           # two parts of whole chunks
        big = blocks(1000)
        assert len(big) == 16 and big[0] == (0, 64) and big[-1] == (960, 1000)
        assert all(a[1] == b[0] for a, b in zip(big, big[1:])) and all((hi - lo) % 8 == 0 for lo, hi in big[:-1])
        got = np.arange(1000, dtype=np.float32)
        want = got.copy()
        assert validate.passes(got, want, (0.0, 0.0))
        want[999] += 1                                      # only the last block differs
        assert not validate.passes(got, want, (0.0, 0.0))
