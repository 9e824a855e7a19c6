"""Bugs a mutation audit once made and no test caught, each now a named mutant (benchmarks/mutation_named.toml)
killed by a test here: offers (a launch in a host loop, the `excludes` rules), planning (the regression
threshold, the last round's failed ideas, a plan fitted to the slot's own parent), the bandit's blocked-set
swap, the post-mortem of a wrong answer at the benchmark shape, the head-to-head's spread and `decisive`'s
q75, the worker's repeats waiting for the parent's word, the import limits' convolution factor, and held-out
shape cases never equal to a shown one. None needs torch or a GPU."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from cuda_llm.feature_db import assign_features, detect_features, load_catalogue
from cuda_llm.feature_db.offers import builtin_offers, launch_sites, parent_facts, ranked_offer, why_not
from cuda_llm.graph import planning
from cuda_llm.graph import postmortem as pm
from cuda_llm.graph.selection import decisive, head_to_head_decision
from cuda_llm.graph.state import Candidate
from cuda_llm.results import (
    CHALLENGER, CHAMPION, CompileResult, EvalResult, HeadToHead, Status, TimingResult,
)
from cuda_llm.tasks import load_task
from cuda_llm.tasks.import_limits import CONV_PEAK_FACTOR, CPU_BYTES_S, CPU_FLOPS, GPU_FLOPS, PEAK_FACTOR, estimate
from cuda_llm.tasks.shape_cases import CASES, SHOWN, odd_case

CATALOGUE = {f.id: f for f in load_catalogue()}

ONE_LAUNCH_IN_A_LOOP = """
#include <cuda_runtime.h>
__global__ void step(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }
extern "C" void solve(float* x, int n) {
    for (int pass = 0; pass < 8; ++pass) {
        step<<<(n + 255) / 256, 256>>>(x, n);
    }
}
"""
ONE_LAUNCH = """
#include <cuda_runtime.h>
__global__ void step(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }
extern "C" void solve(float* x, int n) { step<<<(n + 255) / 256, 256>>>(x, n); }
"""


# ---------------------------------------------------------------- offers
def test_one_launch_inside_a_host_loop_counts_as_several_kernels():
    task = load_task("gelu").task
    assert launch_sites(ONE_LAUNCH_IN_A_LOOP) == (1, True)
    looped = parent_facts(task, ONE_LAUNCH_IN_A_LOOP)
    once = parent_facts(task, ONE_LAUNCH)
    assert looped.kernels == 2 and looped.kernels_from == "source" and looped.has("multi_kernel")
    assert once.kernels == 1 and not once.has("multi_kernel")
    pdl = CATALOGUE["programmatic_dependent_launch"]
    assert why_not(pdl, looped) is None and why_not(pdl, once) is not None


def test_a_fact_an_offer_excludes_keeps_the_feature_away():
    offers = builtin_offers()
    checked = 0
    for fid, rules in offers.features.items():
        if not rules.excludes or fid not in CATALOGUE:
            continue
        for fact in rules.excludes:
            # the facts that make everything else hold, plus the excluded one
            base = set(rules.needs) | set(rules.needs_any[:1])
            without = parent_facts_of(base - {fact})
            with_it = parent_facts_of(base | {fact})
            if fact in base:
                continue
            assert why_not(CATALOGUE[fid], without) is None, (fid, fact)
            reason = why_not(CATALOGUE[fid], with_it)
            assert reason is not None and reason.startswith("not where:"), (fid, fact, reason)
            checked += 1
    assert checked >= 4


def parent_facts_of(facts: set[str]):
    from cuda_llm.feature_db.offers import ParentFacts

    return ParentFacts(family="elementwise", facts=frozenset(facts), kernels=1, kernels_from="source")


# ---------------------------------------------------------------- planning
def _cand(cid: str, parent: str, feats: list[str], status: str, ms: float | None = None,
          parent_ms: float = 1.0) -> Candidate:
    rnd = int(cid[1:cid.index("c")])
    return Candidate(id=cid, round=rnd, slot=0, parent=parent, parent_ms=parent_ms, features=feats, status=status,
                     ms=ms)


def test_the_regression_threshold_is_five_percent():
    assert planning.REGRESSION == pytest.approx(1.05)
    slower = [_cand("r1c0", "baseline", ["cp_async"], "ok", ms=1.10, parent_ms=1.0)]     # 10% slower: regressed
    assert planning.failed_ideas(slower) == {"baseline": {frozenset({"cp_async"})}}
    noise = [_cand("r1c0", "baseline", ["cp_async"], "ok", ms=1.04, parent_ms=1.0)]      # 4%: within the noise
    assert planning.failed_ideas(noise) == {}


def _deps(tmp_path: Path, task: str = "sgemm") -> SimpleNamespace:
    from cuda_llm.runs.rundir import RunDir

    loaded = load_task(task)
    rd = RunDir.create(tmp_path / "runs", task)
    return SimpleNamespace(rundir=rd, loaded=loaded, task=loaded.task, catalogue=list(CATALOGUE.values()),
                           device=None, event=lambda *a, **k: None, stats=None, arch="sm_90")


def _write_round(deps: SimpleNamespace, rnd: int, cands: list[Candidate]) -> None:
    folder = Path(deps.rundir.root) / "rounds" / f"r{rnd}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "candidates.json").write_text(json.dumps([c.model_dump() for c in cands]))


def test_run_failed_ideas_reads_every_round_before_the_one_planned_the_last_included(tmp_path):
    deps = _deps(tmp_path)
    _write_round(deps, 1, [_cand("r1c0", "baseline", ["split_k"], "wrong_answer")])
    _write_round(deps, 2, [_cand("r2c0", "baseline", ["cp_async"], "compile_error"),
                           _cand("r2c1", "r1c0", ["vector_loads"], "ok", ms=3.0, parent_ms=1.0)])
    _write_round(deps, 3, [_cand("r3c0", "baseline", ["smem_tiling"], "wrong_answer")])   # not yet planned
    assert planning.run_failed_ideas(deps, 3) == {
        "baseline": {frozenset({"split_k"}), frozenset({"cp_async"})}, "r1c0": {frozenset({"vector_loads"})}}
    assert planning.run_failed_ideas(deps, 2) == {"baseline": {frozenset({"split_k"})}}
    assert planning.run_failed_ideas(deps, 1) == {}


def test_a_plan_is_fitted_to_each_slots_own_parent(tmp_path):
    from cuda_llm.agents.planner import CandidatePlan

    deps = _deps(tmp_path)
    src = (Path(deps.loaded.task.baseline_path)).read_text()
    (Path(deps.rundir.root) / "candidates").mkdir(parents=True, exist_ok=True)
    (Path(deps.rundir.root) / "candidates" / "r1c0.cu").write_text(src)
    facts = parent_facts(deps.task, src, detected=detect_features(src))
    ok = [f for f in ("cp_async", "register_blocking", "vector_loads", "loop_unrolling", "tensor_cores_3xtf32")
          if why_not(CATALOGUE[f], facts) is None]
    assert len(ok) >= 2, ok
    a, b = ok[0], ok[1]
    # on r1c0 the set {a} failed; on the baseline the set {b} failed
    _write_round(deps, 1, [_cand("r1c0", "baseline", [b], "wrong_answer"),
                           _cand("r1c1", "baseline", ["x"], "ok", ms=0.5)])
    _write_round(deps, 2, [_cand("r2c0", "r1c0", [a], "runtime_error")])
    plans = [CandidatePlan(features=[a], idea="1"), CandidatePlan(features=[b], idea="2"),
             CandidatePlan(features=[b], idea="3")]
    parents = [{"parent": "r1c0"}, {"parent": "r1c0"}, {"parent": "baseline"}]
    notes = planning.fit_to_parents(deps, 3, plans, parents)
    assert plans[0].features == []                       # failed on its own parent: the slot is free
    assert plans[1].features == [b]                      # failed on the baseline only: fine on r1c0
    assert plans[2].features == []                       # ... and not on the baseline
    assert any("slot 0" in n and "r1c0" in n for n in notes) and any("slot 2" in n for n in notes)
    assert not any("slot 1" in n for n in notes)


# ---------------------------------------------------------------- the bandit
@pytest.mark.parametrize("n,per", [(3, 1), (4, 1), (3, 2), (4, 2)])
def test_a_blocked_set_is_swapped_for_one_no_other_candidate_of_the_round_has(n, per):
    task = load_task("nbody").task
    from test_planner_offers import facts_of

    ranked = ranked_offer(list(CATALOGUE.values()), [], task=task, facts=facts_of("nbody"), arch="sm_90", seed=1,
                          top=10)
    free = assign_features(ranked, n, per, seed=1)
    for blocked_slot in range(n):
        blocked = {frozenset(free[blocked_slot])}
        sets = assign_features(ranked, n, per, seed=1, blocked=blocked)
        as_sets = [frozenset(s) for s in sets]
        assert len(set(as_sets)) == n, sets                  # every candidate of the round its own set
        assert not set(as_sets) & blocked and all(sets)
        assert [s for i, s in enumerate(sets) if i != blocked_slot] == \
            [s for i, s in enumerate(free) if i != blocked_slot]    # the others keep theirs


# ---------------------------------------------------------------- post-mortems
def test_a_wrong_answer_at_the_benchmark_shape_alone_is_profiled():
    built = CompileResult(ok=True, arch="sm_90", source_hash="h", so_path="/tmp/x.so")

    def res(status: Status, compiled: CompileResult | None = built) -> EvalResult:
        return EvalResult(task="t", candidate="r2c0", source_hash="h", status=status, compile=compiled)

    assert pm.worth_profiling(pm.BENCHMARK_FAILURE, res(Status.wrong_answer))
    for status in (Status.runtime_error, Status.timeout):           # a crash or a hang would only repeat itself
        assert pm.worth_profiling(pm.BENCHMARK_FAILURE, res(status)) is False
    assert pm.worth_profiling(pm.SLOWER, res(Status.ok))
    assert pm.worth_profiling(pm.BENCHMARK_FAILURE, res(Status.wrong_answer, None)) is False   # nothing to profile
    assert pm.worth_profiling(pm.SLOWER, None) is False


# ---------------------------------------------------------------- selection
def _timed(ms: float, status: Status = Status.ok) -> EvalResult:
    return EvalResult(task="t", candidate="c", source_hash="h", status=status,
                      timing=TimingResult(sizes={}, median_ms=ms, min_ms=ms, mean_ms=ms, iqr_ms=0.0, rse=0.01,
                                          samples_ms=[ms], repetitions=1, stop_reason="rse"))


def _h2h(ours: list[float], theirs: list[float]) -> HeadToHead:
    order, legs = [], []
    for a, b in zip(ours, theirs):
        order += [CHALLENGER, CHAMPION]
        legs += [_timed(a), _timed(b)]
    return HeadToHead(challenger="r3c0", champion="r2c1", order=order, legs=legs)


def test_the_head_to_head_gain_must_exceed_the_legs_spread():
    # every challenger leg beats every champion leg and the gain (10%) is far above 1%, but the champion's own
    # legs spread by 14%: inside the noise
    ok, why = head_to_head_decision(_h2h([0.90, 0.95], [0.96, 1.10]))
    assert not ok and "within noise" in why and "needs more than 13.6%" in why, why
    ok, why = head_to_head_decision(_h2h([0.90, 0.91], [0.96, 0.97]))        # tight legs, 6% faster: won
    assert ok and "won head to head" in why, why
    # the challenger's own spread counts as well
    ok, why = head_to_head_decision(_h2h([0.70, 0.95], [0.96, 0.97]))
    assert not ok and "within noise" in why, why


def test_decisive_reads_the_challengers_q75_not_its_minimum():
    assert decisive((1.0, 2.0), (4.0, 5.0)) is False       # the min alone is 4x below; the q75 only 2x
    assert decisive((1.0, 1.3), (4.0, 5.0)) is True        # the q75 3.08x below the best's minimum
    assert decisive((1.0, 4 / 3), (4.0, 5.0)) is True      # exactly 3x: decisive
    assert decisive((1.0, 1.0), (2.9, 5.0)) is False       # the best's minimum counts, not its q75
    assert decisive((1.0, 1.0), None) is False


# ---------------------------------------------------------------- the worker's repeats
class _FakeDev:
    flush_bytes = 64

    def alloc(self, n):
        return 1

    def free(self, p):
        pass

    def bind(self, fn, args):
        return lambda: None

    def sync(self):
        pass

    def memset_d32(self, *a):
        pass

    def reset_persisting_l2(self):
        pass

    def launch_error(self):
        return None


class _FakeBuffers:
    args: list = []

    def __init__(self, *a, **k):
        pass

    def poison(self):
        pass

    def hand_back(self, folder):
        pass

    def free(self):
        pass


class _FakeSets:
    on_device = True

    def __init__(self, *a, **k):
        pass

    def use(self, s):
        pass

    def free(self):
        pass


class _FakeSlots:
    def __init__(self, *a, **k):
        pass

    def hand_back(self):
        return []

    def free(self):
        pass


def _time_with(monkeypatch, commands: list[bytes]) -> list[str]:
    """Worker.time with every device part faked and each timing loop one call: the events it emits."""
    from cuda_llm.tools.harness import worker_loop
    from cuda_llm.tools.harness.timing_budget import TimingBudget
    from cuda_llm.tools.harness.worker_protocol import TimeCommand

    monkeypatch.setattr(worker_loop, "Buffers", _FakeBuffers)
    monkeypatch.setattr(worker_loop, "SetStore", _FakeSets)
    monkeypatch.setattr(worker_loop, "_Slots", _FakeSlots)
    monkeypatch.setattr(worker_loop.Worker, "_loop", lambda self, c, prep, call, sched, slots, *a, **k:
                        ([1.0], [0], "enough"))
    events: list[str] = []
    loaded = SimpleNamespace(task=SimpleNamespace())
    w = worker_loop.Worker(_FakeDev(), loaded, None, lambda ev, **f: events.append(ev), commands)
    cmd = TimeCommand(sizes={"n": 1}, sets={}, dirs={"first": "f", "last": "l", "post": "p", "snap": "s"},
                      schedule_seed=1, budget=TimingBudget(timing_repeats=3, warmup=1))
    w.time(cmd)
    return events


def test_the_repeats_wait_for_the_parents_word_after_checks_wait(monkeypatch):
    stopped = _time_with(monkeypatch, [])                      # the parent never answers (a check failed)
    assert "checks-wait" in stopped and "repeat" not in stopped
    assert stopped.index("post") < stopped.index("checks-wait") < stopped.index("timed")
    quit_ = _time_with(monkeypatch, [b'{"cmd": "quit"}\n'])      # any other word: no repeats either
    assert "repeat" not in quit_
    allowed = _time_with(monkeypatch, [b'{"cmd": "repeat"}\n'])
    assert allowed.count("repeat") == 2                          # timing_repeats=3: two more loops
    assert allowed.index("checks-wait") < allowed.index("repeat")


# ---------------------------------------------------------------- import limits
def test_the_estimate_counts_a_convolutions_larger_peak():
    gb = 1 << 30
    plain = estimate(gb, 8e9, "cpu")
    conv = estimate(gb, 8e9, "cpu", convolution=True)
    assert plain.peak_bytes == int(PEAK_FACTOR * gb) and conv.peak_bytes == int(CONV_PEAK_FACTOR * gb)
    assert CONV_PEAK_FACTOR > PEAK_FACTOR
    assert plain.seconds == pytest.approx(2 * (8e9 / CPU_FLOPS + PEAK_FACTOR * gb / CPU_BYTES_S))
    assert conv.seconds == pytest.approx(2 * (8e9 / CPU_FLOPS + CONV_PEAK_FACTOR * gb / CPU_BYTES_S))
    gpu = estimate(gb, 8e9, "cuda")
    assert gpu.seconds < plain.seconds and gpu.device == "cuda" and gpu.tensor_bytes == gb
    assert gpu.seconds == pytest.approx(2 * (8e9 / GPU_FLOPS + PEAK_FACTOR * gb / 5e11))
    assert "16.0 GB" in conv.describe() and "CPU" in conv.describe()


# ---------------------------------------------------------------- shape cases
@pytest.mark.parametrize("values", [
    {"N": 4096, "M": 4096, "K": 8192},
    {"batch_size": 16, "in_features": 8192, "out_features": 8192},
    {"dim": 65536},
    {"a": 64, "b": 128, "c": 256, "d": 512, "e": 1024},
])
def test_a_held_out_case_is_never_a_shown_one_without_torch(values):
    cases = [odd_case(values, k) for k in range(CASES)]
    shown, held = cases[:SHOWN], cases[SHOWN:]
    assert len(held) == CASES - SHOWN >= 1
    for h in held:
        assert h not in shown, (h, shown)
    assert len({tuple(sorted(c.items())) for c in cases}) == CASES
