"""Continuing a finished run with more budget (`resume --rounds +5 --time-budget +2h --token-budget +1M`) and
starting from the user's kernel (`optimize --start-from`). Scripted model and the GPU double, as in
test_graph_loop.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fake_gpu_evaluator import FakeGpuEvaluator, coder_answer, critic_answer, plan_answer, softmax_source
from scripted_chat_model import ScriptedChatModel, detect_role

from cuda_llm.cli import build_parser
from cuda_llm.graph.run import Extension, NotExtendable, RunOptions, resume_run, start_run
from cuda_llm.graph.state import Limits

pytestmark = pytest.mark.slow     # whole graph runs / every suite build: `pytest -m "not slow"` leaves them out

TIMINGS = {"baseline": 10.0, "seed": 4.0, "v5": 5.0, "v3": 3.0, "bad": "wrong_answer"}


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))


def model(variant: str = "v5") -> ScriptedChatModel:
    def respond(messages: list[Any]) -> Any:
        role = detect_role(messages)
        if role == "planner":
            return plan_answer(1)
        if role == "critic":
            return critic_answer()
        return coder_answer(softmax_source(variant))
    return ScriptedChatModel(respond=respond)


def start(tmp_path: Path, m: ScriptedChatModel, **kw: Any):
    seed = kw.pop("start_from", None)
    opts = RunOptions(limits=Limits(n_candidates=1, **kw), runs_dir=tmp_path / "runs", learn=False, start_from=seed)
    return start_run("softmax", None, opts, evaluator=FakeGpuEvaluator(TIMINGS), model_factory=lambda r: m,
                     handle_signals=False)


def resume(tmp_path: Path, out, m: ScriptedChatModel, extend: Extension | None = None):
    return resume_run(out.run_id, tmp_path / "runs", evaluator=FakeGpuEvaluator(TIMINGS), model_factory=lambda r: m,
                      handle_signals=False, extend=extend)


def test_a_finished_run_continues_with_more_rounds_time_and_tokens(tmp_path):
    m = model()
    out = start(tmp_path, m, max_rounds=1, plateau_rounds=5)
    assert out.finished and out.stop_reason == "max_rounds" and out.rounds == 1
    calls = len(m.calls)
    same = resume(tmp_path, out, m)                                  # nothing more without more budget
    assert same.finished and same.rounds == 1 and len(m.calls) == calls
    more = resume(tmp_path, out, model("v3"), Extension(rounds=(True, 2), time_budget_s=(True, 7200.0),
                                                        token_budget=(True, 1_000_000)))
    assert more.finished and more.stop_reason == "max_rounds" and more.rounds == 3
    assert more.best["id"] == "r2c0" and more.final["candidate"] == "r2c0"
    from cuda_llm.runs.run_info import read_values
    from cuda_llm.runs.rundir import RunDir

    lim = read_values(RunDir(out.root))["limits"]
    assert lim["max_rounds"] == 3 and lim["time_budget_s"] > 7200 and lim["token_budget"] > 1_000_000


def test_more_rounds_without_the_budget_that_ran_out_are_refused(tmp_path):
    m = model()
    out = start(tmp_path, m, max_rounds=5, plateau_rounds=5, token_budget=1)     # stops on tokens after round 1
    assert out.finished and out.stop_reason == "token_budget"
    calls = len(m.calls)
    with pytest.raises(NotExtendable, match="token budget.*--token-budget"):
        resume(tmp_path, out, m, Extension(rounds=(True, 2)))
    assert len(m.calls) == calls


def test_an_unfinished_run_is_not_extended(tmp_path):
    """A run halted at its baseline has not finished: more budget is refused; plain resume is the way."""
    m = model()
    opts = RunOptions(limits=Limits(n_candidates=1), runs_dir=tmp_path / "runs", learn=False)
    stopped = start_run("softmax", None, opts, evaluator=FakeGpuEvaluator({"baseline": "wrong_answer"}),
                        model_factory=lambda r: m, handle_signals=False)
    with pytest.raises(NotExtendable, match="has not finished"):
        resume(tmp_path, stopped, m, Extension(rounds=(True, 2)))
    assert m.calls == []


def test_start_from_a_passing_kernel(tmp_path):
    seed = tmp_path / "mine.cu"
    seed.write_text(softmax_source("seed"))
    m = model("v3")
    out = start(tmp_path, m, max_rounds=1, start_from=seed)
    assert out.finished
    assert (out.root / "candidates" / "seed.cu").read_text() == seed.read_text()
    import json

    cands = json.loads((out.root / "rounds" / "r1" / "candidates.json").read_text())
    assert cands[0]["parent"] == "seed" and cands[0]["parent_ms"] == pytest.approx(4.0, rel=0.02)
    assert out.best["id"] == "r1c0"
    # the report's tree hangs r1c0 under the seed, and show knows the seed
    from cuda_llm.report.candidate_view import candidate_view, known_ids
    from cuda_llm.report.html import build_report_data, candidate_tree
    from cuda_llm.report.summary import build_summary
    from cuda_llm.runs.run_info import read_values
    from cuda_llm.runs.rundir import RunDir

    rd = RunDir(out.root)
    values = read_values(rd)
    assert known_ids(rd, values)[:2] == ["baseline", "seed"]
    assert candidate_view(rd, values, "seed").status == "ok"
    tree = candidate_tree(build_report_data(rd, values, build_summary(rd, values)))
    assert tree.index('data-candidate="seed"') < tree.index('data-candidate="r1c0"')
    assert 'id="cand-seed"' in tree and "variant: seed" in tree


def test_start_from_a_failing_kernel_is_refused_with_its_verdict(tmp_path):
    seed = tmp_path / "mine.cu"
    seed.write_text(softmax_source("bad"))
    m = model()
    out = start(tmp_path, m, max_rounds=1, start_from=seed)
    assert not out.finished and out.halt == "seed_failed"
    assert "wrong_answer" in out.halt_text and m.calls == []


def test_resume_parses_relative_budgets():
    args = build_parser().parse_args(["resume", "RUN", "--rounds", "+5", "--time-budget", "+2h", "--token-budget", "+1M"])
    assert args.rounds == (True, 5) and args.time_budget == (True, 7200.0) and args.token_budget == (True, 1_000_000)
    args = build_parser().parse_args(["resume", "RUN", "--rounds", "12"])
    assert args.rounds == (False, 12) and args.time_budget is None
    lim = Extension(rounds=(True, 5), time_budget_s=(False, 3600.0)).apply(Limits(), rounds_done=4, elapsed_s=100,
                                                                          tokens_used=10)
    assert lim.max_rounds == 9 and lim.time_budget_s == 3600 and lim.token_budget == Limits().token_budget
