"""Full graph runs on the CPU: scripted LLM answers, real nvcc, GPU measurements set by the test.

Each run goes START -> setup -> plan -> code (fan-out) -> evaluate -> profile -> select -> critique -> ...
with a real SQLite checkpointer and run directory; only the LLM and the GPU timings are doubles.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from fake_gpu_evaluator import (
    FakeGpuEvaluator, coder_answer, critic_answer, plan_answer, softmax_source, variant_of,
)
from scripted_chat_model import ScriptedChatModel, detect_role

from cuda_llm.graph.run import RunOptions, start_run
from cuda_llm.graph.state import Limits

pytestmark = pytest.mark.slow     # whole graph runs / every suite build: `pytest -m "not slow"` leaves them out

TIMINGS = {"baseline": 10.0, "v5": 5.0, "v6": 6.0, "v2": 2.0, "v199": 1.99, "v3": 3.0, "fixed": 4.0}


def shared_cache(tmp_path_factory) -> Path:
    """One compile cache for every graph test of the session: each distinct kernel is compiled once."""
    path = tmp_path_factory.getbasetemp() / "graph-compile-cache"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(autouse=True, scope="module")
def _shared_compile_cache(tmp_path_factory):
    old = os.environ.get("CUDA_LLM_CACHE")
    os.environ["CUDA_LLM_CACHE"] = str(shared_cache(tmp_path_factory))
    yield
    if old is None:
        os.environ.pop("CUDA_LLM_CACHE", None)
    else:
        os.environ["CUDA_LLM_CACHE"] = old


def scripted(kernels: dict[str, str] | list[str], *, n: int) -> ScriptedChatModel:
    """Planner and critic always answer; the coder answers by candidate id (``Write candidate `r2c1```):
    ``kernels`` maps ids to sources ("*" = any other), or is a list given round by round, slot by slot."""
    table = kernels if isinstance(kernels, dict) else _by_round(kernels, n)

    def respond(messages: list[Any]) -> str:
        role = detect_role(messages)
        if role == "planner":
            return plan_answer(n, features=offered_ids(messages))
        if role == "critic":
            return critic_answer()
        cid = candidate_of(messages)
        return coder_answer(table.get(cid, table.get("*")))

    return ScriptedChatModel(respond=respond)


def _by_round(kernels: list[str], n: int) -> dict[str, str]:
    table = {f"r{i // n + 1}c{i % n}": src for i, src in enumerate(kernels)}
    table["*"] = kernels[-1]
    return table


def candidate_of(messages: list[Any]) -> str:
    """The candidate a coder conversation is about: the last ``Write candidate `r2c1``` in it (a refinement turn
    asks for a new candidate in the same conversation; a compile-fix turn asks for none, so it keeps the first's)."""
    import re

    found = re.findall(r"Write candidate `([^`]+)`", "\n".join(str(x.content) for x in messages))
    return found[-1] if found else "*"


def offered_ids(messages: list[Any]) -> tuple[str, ...]:
    """The feature ids the planner was offered (so the scripted plan uses only those)."""
    import re

    text = messages[-1].content
    part = text.split("Offered features", 1)[-1]
    ids = re.findall(r"^- `([a-z0-9_]+)`", part, re.M)
    return tuple(ids) or ("coalesced_access",)


def run(tmp_path: Path, kernels: list[str], *, n: int = 2, timings: dict | None = None,
        head_to_head: dict | None = None, **limits: Any):
    model = scripted(kernels, n=n)
    ev = FakeGpuEvaluator(timings or TIMINGS, log_path=tmp_path / "evals.log", confirm_timings=head_to_head)
    opts = RunOptions(limits=Limits(n_candidates=n, **limits), runs_dir=tmp_path / "runs",
                      stats_path=tmp_path / "stats.sqlite")
    out = start_run("softmax", None, opts, evaluator=ev, model_factory=lambda role: model, handle_signals=False)
    return out, model, ev


def trace(out) -> list[dict]:
    return [json.loads(line) for line in (out.root / "trace.jsonl").read_text().splitlines() if line.strip()]


def test_keeps_the_fastest_and_ignores_wins_inside_the_noise(tmp_path):
    k = [softmax_source(v) for v in ("v5", "v6", "v2", "v3", "v199", "v6")]
    out, model, ev = run(tmp_path, k, max_rounds=3, plateau_rounds=5)
    assert out.finished and out.stop_reason == "max_rounds"
    assert out.best["id"] == "r2c0"                        # v2; v199 (1.99 ms) is inside v2's noise
    assert variant_of((out.root / "best.cu").read_text()) == "v2"
    assert out.final["status"] == "ok" and out.final["speedup"] == pytest.approx(5.0, rel=0.01)
    events = trace(out)
    sel = [e for e in events if e["event"] == "decision" and e.get("kind") == "selection"]
    assert [e["replaced"] for e in sel] == [True, True, False]
    assert "within noise" in sel[2]["why"]
    h2h = [c["variant"] for c in ev.calls if c["kind"] == "head_to_head"]
    assert h2h == ["v5", "baseline", "baseline", "v5", "v2", "v5", "v5", "v2"]   # each new best head to head, in turns
    assert "won head to head" in sel[0]["why"] and "won head to head" in sel[1]["why"]
    assert {"planner", "coder", "critic"} <= set(out.tokens)
    assert out.tokens["coder"]["calls"] == 6
    assert any(e["event"] == "node_end" and e.get("node") == "critique" for e in events) or \
        any(e.get("node") == "critique" for e in events)
    # every candidate records its parent and the features it was asked to apply
    cands = [e for e in events if e["event"] == "candidate"]
    assert all(e["parent"] for e in cands)
    # the last slot of each round is free (Limits.free_slots = 1): no assigned features; the others have some
    assert all(bool(e["features"]) == (not e["candidate"].startswith(("r1c1", "r2c1", "r3c1"))) for e in cands)
    plan = json.loads((out.root / "rounds" / "r1" / "plan.json").read_text())["candidates"]
    assert plan["r1c1"]["free"] and not plan["r1c0"]["free"]
    assert {e["parent"] for e in cands if e["candidate"].startswith("r3")} == {"r2c0"}
    # the feature database heard of every candidate: r3c1 repeats r1c1's source (its measurement is read
    # from the run's cache) but over another parent, so it counts again. These candidates only rename the
    # naive kernel, so no feature is in their code that was not in their parent's: nothing is credited, and
    # each asked feature is a compliance miss (feature_db/credit.py)
    from cuda_llm.feature_db.stats import StatsStore

    rows = StatsStore(tmp_path / "stats.sqlite").all(category="reduction")
    assert sum(r.asked for r in rows) == 3 and sum(r.complied for r in rows) == 0   # the 3 planned (not free) ones
    assert sum(r.tries for r in rows) == 0 and not any(r.n_rewards for r in rows)
    # the free candidates were asked nothing and introduced nothing: nothing to credit
    assert sum(1 for e in events if e["event"] == "credit") == 3


@pytest.mark.parametrize("challenger_ms, kept", [(4.885, True), (4.985, False)], ids=["2.3pct-kept", "0.3pct-not"])
def test_a_challenger_is_kept_when_it_wins_head_to_head_against_the_best(tmp_path, challenger_ms, kept):
    """r2c0 (v2) first measures far below the best r1c0 (v5, 5 ms), then head to head in one job it runs at
    ``challenger_ms``: 2.3% faster than the champion is kept, 0.3% is noise and is not."""
    k = [softmax_source(v) for v in ("v5", "v6", "v2", "v3")]
    out, model, ev = run(tmp_path, k, max_rounds=2, plateau_rounds=5, head_to_head={"v2": challenger_ms})
    sel = [e for e in trace(out) if e["event"] == "decision" and e.get("kind") == "selection"]
    assert sel[1]["candidate"] == "r2c0" and sel[1]["replaced"] is kept, sel[1]["why"]
    assert out.best["id"] == ("r2c0" if kept else "r1c0")
    legs = [(c["candidate"], c["variant"]) for c in ev.calls if c["kind"] == "head_to_head"][4:]
    assert legs == [("r2c0-h2h1", "v2"), ("r1c0-h2h2", "v5"), ("r1c0-h2h3", "v5"), ("r2c0-h2h4", "v2")]
    stored = json.loads((out.root / "head_to_head" / "r2c0-vs-r1c0.json").read_text())
    assert stored["order"] == ["challenger", "champion", "champion", "challenger"] and len(stored["legs"]) == 4


def test_a_decisive_win_is_confirmed_by_a_re_run_without_re_timing_the_champion(tmp_path):
    """r1c0 (v3, 3 ms) against the naive baseline (10 ms): more than DECISIVE_RATIO apart, so no head-to-head
    re-times the slow baseline; a re-run of the challenger alone confirms it. Round 2's v2 against v3 (1.5x)
    is not decisive and goes head to head."""
    k = [softmax_source(v) for v in ("v3", "v6", "v2", "v5")]
    out, model, ev = run(tmp_path, k, max_rounds=2, plateau_rounds=5)
    sel = [e for e in trace(out) if e["event"] == "decision" and e.get("kind") == "selection"]
    assert sel[0]["candidate"] == "r1c0" and sel[0]["replaced"], sel[0]["why"]
    assert "confirmed without re-timing it" in sel[0]["why"]
    assert [c["candidate"] for c in ev.calls if c["kind"] == "confirm"] == ["r1c0-confirm"]
    legs = [(c["candidate"], c["variant"]) for c in ev.calls if c["kind"] == "head_to_head"]
    assert legs == [("r2c0-h2h1", "v2"), ("r1c0-h2h2", "v3"), ("r1c0-h2h3", "v3"), ("r2c0-h2h4", "v2")]
    assert sel[1]["replaced"] and "won head to head" in sel[1]["why"] and out.best["id"] == "r2c0"


def test_repairs_after_a_compile_error(tmp_path):
    k = {"r1c0": softmax_source("v5", broken=True), "r1c1": softmax_source("v6", broken=True),
         "r1c0f1": softmax_source("fixed"), "r1c1f1": softmax_source("v6", broken=True)}
    out, model, ev = run(tmp_path, k, max_rounds=1, max_repairs=2, compile_fix_turns=0)
    assert out.finished and out.best["id"] == "r1c0f1"
    repair_calls = [c for c in model.calls_for("coder") if "failed" in c.user.lower() or "undefined_symbol" in c.user]
    assert repair_calls, "the coder was not shown the failed source"
    assert any("undefined_symbol" in c.user for c in repair_calls)   # the condensed nvcc error reached the coder
    events = trace(out)
    assert any(e["event"] == "decision" and e.get("kind") == "repair" for e in events)
    statuses = [c["status"] for c in ev.calls if c["kind"] == "evaluate"]
    assert statuses[:2] == ["compile_error", "compile_error"] and "ok" in statuses[2:]


def test_repairs_are_bounded(tmp_path):
    k = {"*": softmax_source("v5", broken=True)}
    out, model, ev = run(tmp_path, k, n=1, max_rounds=1, max_repairs=1, compile_fix_turns=0)
    assert out.finished and out.best["id"] == "baseline"
    assert len(model.calls_for("coder")) == 2                 # first try + one repair
    assert variant_of((out.root / "best.cu").read_text()) is None   # the naive kernel stays best


def test_compile_errors_go_back_to_the_coder_before_evaluation(tmp_path):
    """A source that does not build gets its nvcc errors back in the same conversation; only the fixed file
    is evaluated, and the turns are bounded."""
    def respond(messages: list[Any]) -> str:
        role = detect_role(messages)
        if role == "planner":
            return plan_answer(2, features=offered_ids(messages))
        if role == "critic":
            return critic_answer()
        turn = sum(m.type == "ai" for m in messages)
        if candidate_of(messages) == "r1c0":
            return coder_answer(softmax_source("v5", broken=turn == 0))       # fixed on the second turn
        return coder_answer(softmax_source("v6", broken=True))               # never fixed

    model = ScriptedChatModel(respond=respond)
    ev = FakeGpuEvaluator(TIMINGS, log_path=tmp_path / "evals.log")
    opts = RunOptions(limits=Limits(n_candidates=2, max_rounds=1, max_repairs=0, compile_fix_turns=2),
                      runs_dir=tmp_path / "runs", learn=False)
    out = start_run("softmax", None, opts, evaluator=ev, model_factory=lambda role: model, handle_signals=False)
    assert out.finished and out.best["id"] == "r1c0"
    conv = {c: [x for x in model.calls_for("coder") if candidate_of(x.messages) == c] for c in ("r1c0", "r1c1")}
    assert len(conv["r1c0"]) == 2 and len(conv["r1c1"]) == 3          # first answer + fix turns (2 at most)
    fix = conv["r1c0"][1].messages[-1].content
    assert "does not build" in fix and "undefined_symbol" in fix and "2 more compile checks" not in fix
    assert conv["r1c1"][2].messages[-1].content.count("undefined_symbol") >= 1
    evaluated = [c["candidate"] for c in ev.calls if c["kind"] == "evaluate"]
    assert evaluated.count("r1c0") == 1 and evaluated.count("r1c1") == 1   # each evaluated once, after its turns
    statuses = {c["candidate"]: c["status"] for c in ev.calls if c["kind"] == "evaluate"}
    assert statuses == {"r1c0": "ok", "r1c1": "compile_error"}
    events = trace(out)
    fixes = [e for e in events if e["event"] == "compile_fix"]
    assert [e["candidate"] for e in fixes].count("r1c1") == 2 and [e["candidate"] for e in fixes].count("r1c0") == 1
    cand = {e["candidate"]: e for e in events if e["event"] == "candidate"}
    assert cand["r1c0"]["fix_turns"] == 1 and cand["r1c0"]["builds"] is True
    assert cand["r1c1"]["fix_turns"] == 2


def test_a_failure_with_new_features_is_repaired_even_when_a_sibling_passed(tmp_path):
    """r1c0 passes; r1c1 (other features) fails: it is repaired all the same, and its features are charged
    with a failure only when the repair fails too."""
    k = {"r1c0": softmax_source("v5"), "r1c1": softmax_source("wa1"), "r1c1f1": softmax_source("wa2"),
         "r1c1f2": softmax_source("v3")}
    timings = {**TIMINGS, "wa1": "wrong_answer", "wa2": "wrong_answer"}
    out, model, ev = run(tmp_path, k, timings=timings, max_rounds=1, max_repairs=2, compile_fix_turns=0,
                         free_slots=0)   # both candidates planned: r1c1 has features of its own
    assert out.finished and out.best["id"] == "r1c1f2"                      # the repaired candidate won
    events = trace(out)
    rep = [e for e in events if e["event"] == "decision" and e.get("kind") == "repair"]
    assert [e["candidates"] for e in rep] == [["r1c1"], ["r1c1f1"]]
    assert rep[0]["why"] == "feature sets new to the run"
    repair_prompt = next(c.user for c in model.calls_for("coder") if "Write candidate `r1c1f1`" in c.user)
    assert "wrong_answer" in repair_prompt and "A working reference: the parent `baseline`" in repair_prompt
    assert "idea 1" in repair_prompt                                          # the planner's idea for r1c1
    from cuda_llm.feature_db.stats import StatsStore

    rows = {r.feature: r for r in StatsStore(tmp_path / "stats.sqlite").all(category="reduction")}
    r1c1_features = next(e["features"] for e in events if e["event"] == "candidate" and e["candidate"] == "r1c1")
    # r1c1 and r1c1f1 failed but were repaired: no failure charged; r1c1f2 passed: one passing try
    assert all(rows[f].tries == rows[f].passed for f in r1c1_features)


def test_stops_on_plateau(tmp_path):
    k = [softmax_source(v) for v in ("v5", "v6", "v6", "v6")]
    out, model, ev = run(tmp_path, k, max_rounds=10, plateau_rounds=2)
    assert out.stop_reason == "plateau" and out.rounds == 3    # improved in round 1, then two flat rounds
    assert out.best["id"] == "r1c0"


@pytest.mark.parametrize("limit,reason", [
    ({"max_rounds": 1}, "max_rounds"),
    ({"time_budget_s": 0.01, "reserve_s": 0.0}, "time_budget"),
    ({"token_budget": 2000}, "token_budget"),
])
def test_stops_on_each_budget(tmp_path, limit, reason):
    k = [softmax_source(v) for v in ("v5", "v6")]
    out, model, ev = run(tmp_path, k, **{"max_rounds": 5, "plateau_rounds": 5, **limit})
    assert out.finished and out.stop_reason == reason and out.rounds == 1
    assert out.final["candidate"] == "r1c0"                   # the final validation still ran
    stop = [e for e in trace(out) if e["event"] == "decision" and e.get("kind") == "stop"]
    assert stop and stop[0]["reason"] == reason


def test_a_user_stage_can_reject_candidates(tmp_path):
    from cuda_llm.graph.stage_list import default_stages

    class NoV5:
        name = "sanitize"

        def run(self, ctx):
            update: dict = {}
            for c in ctx.passed():
                if "variant: v5" in ctx.source(c.id):
                    update = ctx.merge(update, ctx.reject(c.id, "sanitizer: out-of-bounds write"))
            return update

    stages = default_stages()
    stages.insert(1, NoV5())
    model = scripted({"r1c0": softmax_source("v5"), "r1c1": softmax_source("v6")}, n=2)
    ev = FakeGpuEvaluator(TIMINGS)
    opts = RunOptions(limits=Limits(n_candidates=2, max_rounds=1), runs_dir=tmp_path / "runs", learn=False)
    out = start_run("softmax", None, opts, evaluator=ev, model_factory=lambda role: model, stages=stages,
                    handle_signals=False)
    assert out.best["id"] == "r1c1"                           # v5 was faster but rejected by the stage
    nodes = [e.get("node") for e in trace(out) if e["event"] == "node_start"]
    assert nodes.index("evaluate") < nodes.index("sanitize") < nodes.index("profile")


def test_checkpoint_growth_per_round_is_small(tmp_path):
    """State keeps only summaries: the checkpoint database grows by at most 50 KB per round (measured on
    the file, once per round, by a tool stage: the same hook users have)."""
    from cuda_llm.graph.stage_list import default_stages

    sizes: list[int] = []

    class MeasureCheckpoint:
        name = "measure"

        def run(self, ctx):
            db = sqlite3.connect(Path(ctx.rundir.root) / "checkpoint.sqlite")   # pages, WAL included
            sizes.append(db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0])
            db.close()
            return {}

    k = [softmax_source(v) for v in ("v5", "v6", "v2", "v3")]
    model = scripted(k, n=4)
    opts = RunOptions(limits=Limits(n_candidates=4, max_rounds=8, plateau_rounds=10), runs_dir=tmp_path / "runs",
                      learn=False)
    out = start_run("softmax", None, opts, evaluator=FakeGpuEvaluator(TIMINGS), model_factory=lambda role: model,
                    stages=default_stages() + [MeasureCheckpoint()], handle_signals=False)
    assert out.rounds == 8 and len(sizes) == 8
    per_round = (sizes[-1] - sizes[0]) / (len(sizes) - 1)
    db = sqlite3.connect(out.root / "checkpoint.sqlite")
    n_ckpt = db.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    print(f"\ncheckpoint growth: {per_round / 1024:.1f} KiB/round on disk (file {sizes[0] / 1024:.0f} KiB after "
          f"round 1, {sizes[-1] / 1024:.0f} KiB after round 8; 4 candidates per round; {n_ckpt} checkpoints)")
    assert 0 < per_round <= 50 * 1024


@pytest.mark.parametrize("mode", ["rejected", "unsupported"])
def test_runs_against_servers_without_json_schema(tmp_path, mode):
    """Planner and critic fall back to JSON in plain text through the run's LLM cache wrapper."""
    from cuda_llm.agents.structured import forget_methods

    forget_methods()
    base = scripted({"r1c0": softmax_source("v5"), "r1c1": softmax_source("v6")}, n=2)
    model = ScriptedChatModel(respond=base.respond, structured_output=mode, model_name=f"plain-{mode}")
    opts = RunOptions(limits=Limits(n_candidates=2, max_rounds=1), runs_dir=tmp_path / "runs", learn=False)
    out = start_run("softmax", None, opts, evaluator=FakeGpuEvaluator(TIMINGS), model_factory=lambda role: model,
                    handle_signals=False)
    assert out.finished and out.best["id"] == "r1c0"
    crit = [e for e in trace(out) if e["event"] == "decision" and e.get("kind") == "critique"]
    assert crit and crit[0]["rule_based"] is False           # the critic's own answer was used
    # a server that rejects json_schema is found out once; later requests go as plain text
    assert sum(c.structured for c in model.calls) == (1 if mode == "rejected" else 0)


def test_an_evaluator_without_the_whole_protocol_is_refused_by_name(tmp_path):
    """An evaluator with only the four measuring methods is not an Evaluator: the run refuses it before
    anything is spent, naming what it lacks and where the defaults come from."""
    class MeasureOnly:
        def __init__(self, inner):
            self.inner, self.arch, self.device = inner, inner.arch, inner.device

        def evaluate(self, *a):
            return self.inner.evaluate(*a)

        def baseline(self, *a):
            return self.inner.baseline(*a)

        def profile(self, *a):
            return self.inner.profile(*a)

        def final_check(self, *a):
            return self.inner.final_check(*a)

    model = scripted({"r1c0": softmax_source("v6")}, n=1)
    opts = RunOptions(limits=Limits(n_candidates=1, max_rounds=1, max_repairs=0), runs_dir=tmp_path / "runs",
                      learn=False)
    with pytest.raises(TypeError, match=r"MeasureOnly is not an Evaluator: it lacks library, head_to_head, build.*ToolsMixin"):
        start_run("softmax", None, opts, evaluator=MeasureOnly(FakeGpuEvaluator(TIMINGS)),
                  model_factory=lambda role: model, handle_signals=False)
