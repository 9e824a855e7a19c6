"""Credit that learns the right lesson (feature_db/credit.py), on constructed histories, through the real
SQLite statistics and the bandit; and the migration of statistics files written before it."""

from __future__ import annotations

import math
import sqlite3

import pytest

from cuda_llm.feature_db import (
    Feature, StatsStore, StepOutcome, credit_step, detect_pair, headroom_closed, load_catalogue, rank_features,
)

CATALOGUE = load_catalogue()


def ok(ms: float, parent_ms: float, sol_ms: float | None = 1.0) -> StepOutcome:
    return StepOutcome(compiled=True, passed=True, ms=ms, parent_ms=parent_ms, sol_ms=sol_ms)


# ------------------------------------------------------------------------------------------- pure rules
def test_headroom_share_means_the_same_early_and_late():
    # naive at 3% of SOL -> 50%: almost all of the headroom closed
    assert headroom_closed(33.3, 2.0, 1.0) == pytest.approx((33.3 - 2.0) / 32.3)
    # 70% -> 80% of SOL: 42% of what was left
    assert headroom_closed(1 / 0.7, 1 / 0.8, 1.0) == pytest.approx(0.4167, abs=1e-3)
    assert headroom_closed(2.0, 2.0, 1.0) == 0.0
    assert headroom_closed(2.0, 10.0, 1.0) == -1.0                 # a regression is clipped at -1
    assert headroom_closed(2.0, 1.0, None) == pytest.approx(0.5)   # no bound known: share of time removed
    # a parent at the bound (timing noise): headroom floored at 5% of its time, no division blow-up
    assert headroom_closed(1.0, 0.99, 1.0) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="positive"):
        headroom_closed(0.0, 1.0, None)


def test_only_new_detected_features_are_credited_and_split_the_reward():
    c = credit_step(asked=["warp_shuffle", "cp_async"], detected={"warp_shuffle", "vector_loads", "coalesced_access"},
                    parent_detected={"coalesced_access"}, outcome=ok(1.5, 3.0, sol_ms=1.0))
    assert c.credited == ["vector_loads", "warp_shuffle"]            # coalesced_access came from the parent
    assert c.complied == ["warp_shuffle"] and c.absent == ["cp_async"] and c.compliance == 0.5
    assert c.headroom_closed == pytest.approx(0.75) and c.reward_per_feature == pytest.approx(0.375)
    assert c.speedup_over_parent == pytest.approx(2.0)


def test_an_asked_but_absent_feature_gets_nothing():
    c = credit_step(asked=["tma_bulk_copy"], detected={"vector_loads"}, parent_detected=set(), outcome=ok(1.0, 4.0))
    assert "tma_bulk_copy" not in c.credited and c.absent == ["tma_bulk_copy"] and c.compliance == 0.0
    assert c.credited == ["vector_loads"] and c.reward_per_feature == pytest.approx(1.0)


def test_failures_credit_a_try_but_no_reward():
    c = credit_step(asked=["cp_async"], detected={"cp_async"}, parent_detected=set(),
                    outcome=StepOutcome(compiled=True, passed=False, ms=0.5, parent_ms=3.0, sol_ms=1.0))
    assert c.credited == ["cp_async"] and c.reward_per_feature is None and c.headroom_closed is None
    nothing_new = credit_step(asked=[], detected={"coalesced_access"}, parent_detected={"coalesced_access"},
                              outcome=ok(1.0, 2.0))
    assert nothing_new.credited == [] and nothing_new.reward_per_feature is None and nothing_new.headroom_closed == 1.0


def test_detection_of_candidate_and_parent_uses_the_compile_report_for_both_or_neither():
    from cuda_llm.results import KernelResources

    big_smem = Feature.model_validate({
        "id": "big_smem", "name": "n", "category": "memory", "bottleneck": "b", "min_cc": [5, 0], "applies_to": ["*"],
        "serves": ["memory-bound"], "how": "h", "exemplar": "__global__ void k() {}",
        "detector": {"any_of": [{"resource": "shared_bytes", "op": ">=", "value": 4096}]}})
    k = [KernelResources(name="k", shared_bytes=8192)]
    # the parent's report is unknown: the candidate's report is not used either, so nothing looks new
    assert detect_pair("x", k, "y", None, [big_smem]) == (set(), set())
    assert detect_pair("x", k, "y", k, [big_smem]) == ({"big_smem"}, {"big_smem"})
    assert detect_pair("x", k, "y", [KernelResources(name="k")], [big_smem]) == ({"big_smem"}, set())
    assert detect_pair("x", k, None, [], [big_smem]) == ({"big_smem"}, set())


# ------------------------------------------------------------------------ constructed histories, stored
def record(store: StatsStore, credit, *, model: str = "coder-a", category: str = "reduction", compiled=True,
           passed=True, key: str | None = None) -> None:
    store.record(arch="sm_90", category=category, features=credit.credited, compiled=compiled, passed=passed,
                 speedup_over_parent=credit.speedup_over_parent, reward=credit.reward_per_feature,
                 asked=credit.asked, complied=credit.complied, model=model, key=key)


REWRITE = {"coalesced_access", "readonly_cache", "block_reduction_tree", "warp_shuffle", "vector_loads",
           "grid_stride_loop"}


def test_a_round_one_rewrite_does_not_inflate_its_co_occurring_features(tmp_path):
    """Round 1 rewrites the naive kernel (33 ms, SOL 1 ms) into a 2 ms kernel with six features at once;
    later rounds add one feature each and close part of what is left. The late single-feature steps must
    be worth more per feature than anything that merely co-occurred in the rewrite."""
    store = StatsStore(tmp_path / "h.sqlite")
    naive: set[str] = set()
    rewrite = credit_step(asked=["warp_shuffle", "vector_loads"], detected=REWRITE, parent_detected=naive,
                          outcome=ok(2.0, 33.3))
    record(store, rewrite)
    assert len(rewrite.credited) == 6
    # the old rule (log speedup over the parent, to everything asked or new) gave each of them 16.6x
    assert rewrite.speedup_over_parent == pytest.approx(16.65)
    late = credit_step(asked=["loop_unrolling"], detected=REWRITE | {"loop_unrolling"}, parent_detected=REWRITE,
                       outcome=ok(1 / 0.8, 1 / 0.7))
    assert late.credited == ["loop_unrolling"]
    record(store, late)
    rows = {r.feature: r for r in store.all(arch="sm_90", category="reduction")}
    assert rows["loop_unrolling"].mean_reward == pytest.approx(0.4167, abs=1e-3)
    for f in REWRITE:
        assert rows[f].mean_reward == pytest.approx((33.3 - 2.0) / 32.3 / 6)
        assert rows[f].mean_reward < rows["loop_unrolling"].mean_reward / 2, f
        assert rows[f].mean_speedup == pytest.approx(16.65)          # kept for display only
    ranked = rank_features(CATALOGUE, store, arch="sm_90", category="reduction", method="ucb", model="coder-a")
    by_id = {r.feature.id: r for r in ranked}
    assert all(by_id["loop_unrolling"].expected_value > by_id[f].expected_value for f in REWRITE)


def test_asked_but_absent_is_recorded_as_compliance_and_kept_out_of_the_value(tmp_path):
    store = StatsStore(tmp_path / "c.sqlite")
    for i in range(3):   # the planner asks for cp_async three times; the coder writes vector loads instead
        c = credit_step(asked=["cp_async"], detected={"vector_loads"}, parent_detected=set(), outcome=ok(1.0, 2.0))
        record(store, c, key=f"run/r{i}c0/h{i}")
    cp = store.get("cp_async", "reduction", "sm_90")
    assert (cp.tries, cp.n_rewards, cp.asked, cp.complied, cp.compliance) == (0, 0, 3, 0, 0.0)
    vl = store.get("vector_loads", "reduction", "sm_90")
    assert (vl.tries, vl.n_rewards, vl.asked) == (3, 3, 0) and vl.mean_reward == pytest.approx(1.0)
    ranked = {r.feature.id: r for r in rank_features(CATALOGUE, store, arch="sm_90", category="reduction",
                                                     method="ucb")}
    assert ranked["cp_async"].compliance == 0.0 and "coder used it in 0 of 3 asks" in ranked["cp_async"].reason
    assert ranked["cp_async"].untried
    # nothing of the three steps' rewards reached cp_async: it scores exactly like a never-asked untried feature
    assert ranked["cp_async"].expected_value == pytest.approx(ranked["warp_vote_match"].expected_value)
    assert ranked["vector_loads"].compliance is None


def test_pass_rates_are_keyed_by_the_coder_model(tmp_path):
    store = StatsStore(tmp_path / "m.sqlite")
    for _ in range(6):
        bad = credit_step(asked=["cp_async"], detected={"cp_async"}, parent_detected=set(),
                          outcome=StepOutcome(compiled=False, passed=False))
        record(store, bad, model="small-model", compiled=False, passed=False)
        good = credit_step(asked=["cp_async"], detected={"cp_async"}, parent_detected=set(), outcome=ok(1.5, 2.0))
        record(store, good, model="strong-model")
    assert {(r.model, r.tries, r.passed) for r in store.all(by_model=True)} == {
        ("small-model", 6, 0), ("strong-model", 6, 6)}
    pooled_row = store.get("cp_async", "reduction", "sm_90")
    assert (pooled_row.model, pooled_row.tries, pooled_row.passed) == ("*", 12, 6)
    assert store.get("cp_async", "reduction", "sm_90", model="small-model").passed == 0

    def value(model):
        ranked = rank_features(CATALOGUE, store, arch="sm_90", category="reduction", method="ucb", model=model)
        return next(r for r in ranked if r.feature.id == "cp_async")

    strong, small = value("strong-model"), value("small-model")
    assert strong.expected_value > small.expected_value
    assert "(0/6 by small-model)" in small.reason and "(6/6 by strong-model)" in strong.reason


def test_reward_out_of_range_is_refused(tmp_path):
    store = StatsStore(tmp_path / "r.sqlite")
    with pytest.raises(ValueError, match=r"in \[-1, 1\]"):
        store.record(arch="sm_90", category="reduction", features=["warp_shuffle"], compiled=True, passed=True,
                     speedup_over_parent=2.0, reward=3.0)
    with pytest.raises(ValueError, match="not asked for"):
        store.record(arch="sm_90", category="reduction", features=[], compiled=True, passed=True,
                     speedup_over_parent=None, asked=["cp_async"], complied=["vector_loads"])
    assert store.n_events() == 0


# ------------------------------------------------------------------------------------------- migration
SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE feature_stats (
    feature TEXT NOT NULL, category TEXT NOT NULL, arch TEXT NOT NULL,
    tries INTEGER NOT NULL DEFAULT 0, compiled INTEGER NOT NULL DEFAULT 0, passed INTEGER NOT NULL DEFAULT 0,
    n_speedups INTEGER NOT NULL DEFAULT 0, sum_log_speedup REAL NOT NULL DEFAULT 0,
    mean_log_speedup REAL NOT NULL DEFAULT 0, m2_log_speedup REAL NOT NULL DEFAULT 0, updated_at REAL NOT NULL,
    PRIMARY KEY (feature, category, arch));
CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, arch TEXT NOT NULL,
    category TEXT NOT NULL, features TEXT NOT NULL, compiled INTEGER NOT NULL, passed INTEGER NOT NULL,
    speedup REAL, key TEXT);
CREATE UNIQUE INDEX events_by_key ON events (key);
INSERT INTO meta VALUES ('schema_version', '1');
INSERT INTO feature_stats VALUES ('warp_shuffle', 'reduction', 'sm_90', 4, 4, 3, 3, 1.5, 0.5, 0.08, 1.0);
INSERT INTO feature_stats VALUES ('readonly_cache', 'reduction', 'sm_90', 2, 2, 2, 2, 3.6, 1.8, 0.0, 1.0);
INSERT INTO events (at, arch, category, features, compiled, passed, speedup, key)
    VALUES (1.0, 'sm_90', 'reduction', 'warp_shuffle,readonly_cache', 1, 1, 6.08, 'old/r1c0/h');
"""


def test_a_schema_1_file_migrates_keeping_its_counts(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA_1)
    store = StatsStore(path)
    ws = store.get("warp_shuffle", "reduction", "sm_90", model="")
    assert (ws.tries, ws.compiled, ws.passed, ws.n_speedups) == (4, 4, 3, 3)
    assert ws.mean_speedup == pytest.approx(math.exp(0.5)) and ws.var_log_speedup == pytest.approx(0.04)
    assert (ws.n_rewards, ws.asked, ws.complied) == (0, 0, 0)      # old speedups are not rewards
    assert store.n_events() == 1
    # the old key still deduplicates; new records carry a model and a reward
    assert not store.record(arch="sm_90", category="reduction", features=["warp_shuffle"], compiled=True,
                            passed=True, speedup_over_parent=2.0, key="old/r1c0/h")
    assert store.record(arch="sm_90", category="reduction", features=["warp_shuffle"], compiled=True, passed=True,
                        speedup_over_parent=2.0, reward=0.3, model="m", key="new/r1c0/h")
    both = {r.model: r for r in store.all(by_model=True) if r.feature == "warp_shuffle"}
    assert set(both) == {"", "m"} and both["m"].mean_reward == pytest.approx(0.3)
    assert store.get("warp_shuffle", "reduction", "sm_90").tries == 5
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "2"
        cols = {r[1] for r in conn.execute("PRAGMA table_info(events)")}
    assert {"model", "reward", "asked", "complied"} <= cols
    # opening again is a no-op
    assert StatsStore(path).get("readonly_cache", "reduction", "sm_90").tries == 2


# ------------------------------------------------------------------------ the graph's hook, end to end
WARP_SOFTMAX = """// variant: warp
#include <cuda_runtime.h>
#include <math.h>

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * cols;
    float m = -INFINITY;
    for (int c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.0f;
    for (int c = lane; c < cols; c += 32) s += expf(xr[c] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    for (int c = lane; c < cols; c += 32) y[(size_t)row * cols + c] = expf(xr[c] - m) / s;
}

extern "C" void solve(const float* x, float* y, int rows, int cols) {
    softmax_rows<<<(rows + 3) / 4, 128>>>(x, y, rows, cols);
}
"""


def test_the_graph_credits_what_the_code_introduced(tmp_path, monkeypatch):
    """One round of a real graph run (scripted model, nvcc, invented timings): the warp-per-row candidate
    is credited with the shuffles and read-only loads it introduced, under the scripted coder's model."""
    import json as _json

    from fake_gpu_evaluator import FakeGpuEvaluator, coder_answer, critic_answer, plan_answer, softmax_source
    from scripted_chat_model import ScriptedChatModel, detect_role

    from cuda_llm.graph.run import RunOptions, start_run
    from cuda_llm.graph.state import Limits

    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))

    def respond(messages):
        role = detect_role(messages)
        if role == "planner":
            return plan_answer(2)
        if role == "critic":
            return critic_answer()
        text = "\n".join(str(m.content) for m in messages)
        return coder_answer(WARP_SOFTMAX if "`r1c0`" in text else softmax_source("v6"))

    model = ScriptedChatModel(respond=respond)
    ev = FakeGpuEvaluator({"baseline": 10.0, "warp": 2.0, "v6": 6.0})
    opts = RunOptions(limits=Limits(n_candidates=2, max_rounds=1, free_slots=0), runs_dir=tmp_path / "runs",
                      stats_path=tmp_path / "stats.sqlite")   # both planned: r1c1's asked features are misses
    out = start_run("softmax", None, opts, evaluator=ev, model_factory=lambda role: model, handle_signals=False)
    assert out.finished
    store = StatsStore(tmp_path / "stats.sqlite")
    rows = {(r.feature, r.model): r for r in store.all(by_model=True)}
    assert {m for _, m in rows} == {model.model_name}
    from cuda_llm.feature_db import detect_features
    from cuda_llm.tasks import load_task

    new = sorted(f for f, _ in rows if rows[(f, model.model_name)].tries)
    naive = detect_features(load_task("softmax").task.baseline_path.read_text())
    assert new == sorted(detect_features(WARP_SOFTMAX) - naive)
    assert {"warp_shuffle", "warp_per_row", "coalesced_access"} <= set(new)
    ws = rows[("warp_shuffle", model.model_name)]
    # no peaks in this run: the share of the parent's time removed (0.8), split among the new features
    assert (ws.tries, ws.passed, ws.n_rewards) == (1, 1, 1) and ws.mean_reward == pytest.approx(0.8 / len(new), rel=0.02)
    events = [_json.loads(line) for line in (out.root / "trace.jsonl").read_text().splitlines() if line.strip()]
    asked = {e["candidate"]: e["features"] for e in events if e["event"] == "candidate"}
    credits = {e["candidate"]: e for e in events if e["event"] == "credit"}
    assert set(credits) == {"r1c0", "r1c1"}
    # r1c1 only renames the naive kernel: nothing credited, whatever it was asked for is a compliance miss
    assert credits["r1c1"]["credited"] == [] and credits["r1c1"]["absent"] == asked["r1c1"]
    for f in asked["r1c1"]:
        assert (rows[(f, model.model_name)].asked, rows[(f, model.model_name)].complied) >= (1, 0)
    assert sum(r.asked for r in rows.values()) == len(asked["r1c0"]) + len(asked["r1c1"])


def test_a_free_candidate_is_credited_with_what_its_code_introduced(tmp_path, monkeypatch):
    """The free slot (r1c1: no assigned features) writes the warp-per-row softmax: its new features are
    detected and credited, and nothing counts as asked."""
    import json as _json

    from fake_gpu_evaluator import FakeGpuEvaluator, coder_answer, critic_answer, plan_answer, softmax_source
    from scripted_chat_model import ScriptedChatModel, detect_role

    from cuda_llm.graph.run import RunOptions, start_run
    from cuda_llm.graph.state import Limits

    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    prompts: dict[str, str] = {}

    def respond(messages):
        role = detect_role(messages)
        if role == "planner":
            return plan_answer(1)
        if role == "critic":
            return critic_answer()
        text = "\n".join(str(m.content) for m in messages)
        cid = "r1c1" if "`r1c1`" in text else "r1c0"
        prompts[cid] = text
        return coder_answer(WARP_SOFTMAX if cid == "r1c1" else softmax_source("v6"))

    model = ScriptedChatModel(respond=respond)
    ev = FakeGpuEvaluator({"baseline": 10.0, "warp": 2.0, "v6": 6.0})
    opts = RunOptions(limits=Limits(n_candidates=2, max_rounds=1), runs_dir=tmp_path / "runs",
                      stats_path=tmp_path / "stats.sqlite")
    out = start_run("softmax", None, opts, evaluator=ev, model_factory=lambda role: model, handle_signals=False)
    assert out.finished
    assert "No features are assigned to this candidate" in prompts["r1c1"]
    assert "No features are assigned" not in prompts["r1c0"]
    events = [_json.loads(line) for line in (out.root / "trace.jsonl").read_text().splitlines() if line.strip()]
    asked = {e["candidate"]: e["features"] for e in events if e["event"] == "candidate"}
    assert asked["r1c1"] == [] and asked["r1c0"]
    credit = next(e for e in events if e["event"] == "credit" and e["candidate"] == "r1c1")
    assert {"warp_shuffle", "warp_per_row"} <= set(credit["credited"]) and credit["absent"] == []
    rows = {r.feature: r for r in StatsStore(tmp_path / "stats.sqlite").all()}
    # one try, by the free candidate (r1c0 may have been asked for it: a compliance miss, not a try)
    assert (rows["warp_shuffle"].tries, rows["warp_shuffle"].passed, rows["warp_shuffle"].n_rewards) == (1, 1, 1)


def test_detection_of_candidate_and_parent_uses_the_dataflow_facts_for_both_or_neither():
    """A parent built before the PTX's dataflow was read has no facts: the candidate's are not used either."""
    from cuda_llm.results import SassSummary

    tiled = Feature.model_validate({
        "id": "tiled", "name": "n", "category": "memory", "bottleneck": "b", "min_cc": [5, 0], "applies_to": ["*"],
        "serves": ["memory-bound"], "how": "h", "exemplar": "__global__ void k() {}",
        "detector": {"any_of": [{"flow": "shared_tile"}]}})
    facts = SassSummary(flow={"shared_tile": 1, "register_tile": 0, "shared_stages": 0})
    none_found = SassSummary(flow={"shared_tile": 0, "register_tile": 0, "shared_stages": 0})
    unread = SassSummary()
    assert detect_pair("x", [], "y", [], [tiled], sass=facts, parent_sass=unread) == (set(), set())
    assert detect_pair("x", [], "y", [], [tiled], sass=facts, parent_sass=none_found) == ({"tiled"}, set())
    assert detect_pair("x", [], "y", [], [tiled], sass=facts, parent_sass=facts) == ({"tiled"}, {"tiled"})
    assert detect_pair("x", [], "y", [], [tiled], sass=facts, parent_sass=None) == (set(), set())
