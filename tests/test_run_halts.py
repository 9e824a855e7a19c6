"""Stop rules that need a person: the run halts unfinished and resumable, having spent nothing more.

Graph runs on the CPU with the scripted chat model and the GPU double of tests/ (real nvcc, invented
timings), as in test_graph_loop.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fake_gpu_evaluator import FakeGpuEvaluator, coder_answer, critic_answer, plan_answer, softmax_source
from scripted_chat_model import ScriptedChatModel, detect_role, endpoint_down

from cuda_llm.commands.outcome import exit_code
from cuda_llm.graph.run import RunOptions, resume_run, start_run
from cuda_llm.graph.state import Limits
from cuda_llm.runs.rundir import RunDir
from cuda_llm.runs.run_info import run_info

pytestmark = pytest.mark.slow     # whole graph runs / every suite build: `pytest -m "not slow"` leaves them out

GOOD = {"baseline": 10.0, "v5": 5.0}


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))


def model(*, coder: Any = None, critic: Any = None, n: int = 2) -> ScriptedChatModel:
    def respond(messages: list[Any]) -> Any:
        role = detect_role(messages)
        if role == "planner":
            return plan_answer(n)
        if role == "critic":
            return critic if critic is not None else critic_answer()
        return coder if coder is not None else coder_answer(softmax_source("v5"))

    return ScriptedChatModel(respond=respond)


def start(tmp_path: Path, m: ScriptedChatModel, ev: Any, **limits: Any):
    opts = RunOptions(limits=Limits(n_candidates=2, **limits), runs_dir=tmp_path / "runs", learn=False)
    return start_run("softmax", None, opts, evaluator=ev, model_factory=lambda role: m, handle_signals=False)


def events(out) -> list[dict]:
    return [json.loads(x) for x in (out.root / "trace.jsonl").read_text().splitlines() if x.strip()]


def test_a_failing_baseline_stops_before_any_llm_call_and_resumes_once_fixed(tmp_path):
    m = model()
    out = start(tmp_path, m, FakeGpuEvaluator({"baseline": "wrong_answer"}), max_rounds=1)
    assert not out.finished and out.halt == "baseline_failed"
    assert "naive.cu" in out.halt_text and "cuda-llm resume" in out.halt_text
    assert m.calls == []                                          # nothing spent
    assert exit_code(out) != 0
    info = run_info(RunDir(out.root))
    assert info.state == "stopped" and info.resumable and "baseline_failed" in info.detail
    # the failing baseline was not kept: once fixed, resume measures it again and the run goes on
    fixed = resume_run(out.run_id, tmp_path / "runs", evaluator=FakeGpuEvaluator(GOOD), model_factory=lambda r: m,
                       handle_signals=False)
    assert fixed.finished and fixed.halt is None and fixed.baseline["ms"] == pytest.approx(10.0, rel=0.02)


def test_a_coder_that_never_writes_code_halts_after_n_in_a_row(tmp_path):
    m = model(coder="I would rather describe the kernel in words.")
    out = start(tmp_path, m, FakeGpuEvaluator(GOOD), max_rounds=10, plateau_rounds=10, max_no_code=4)
    assert not out.finished and out.halt == "no_code"
    assert "4 coder answers" in out.halt_text
    assert len(m.calls_for("planner")) == 2                       # round 3 was never planned
    assert exit_code(out) != 0
    assert run_info(RunDir(out.root)).resumable


def test_a_dead_critic_endpoint_halts_instead_of_falling_back_forever(tmp_path):
    m = model(critic=endpoint_down())
    out = start(tmp_path, m, FakeGpuEvaluator(GOOD), max_rounds=10, plateau_rounds=10, max_endpoint_errors=2)
    assert not out.finished and out.halt == "endpoint_errors"
    assert "critic" in out.halt_text and "cuda-llm doctor" in out.halt_text
    assert len(m.calls_for("critic")) == 2
    assert sum(e["event"] == "llm_error" for e in events(out)) == 2


def test_no_device_result_halts_and_is_not_cached(tmp_path):
    m = model()
    ev = FakeGpuEvaluator({"baseline": 10.0, "v5": "no_device"})
    out = start(tmp_path, m, ev, max_rounds=2)
    assert not out.finished and out.halt == "no_device"
    assert not list((out.root / "cache" / "eval").glob("*.json"))   # measured again on a GPU machine


def test_the_real_evaluator_without_a_gpu_halts_before_any_llm_call(tmp_path):
    from cuda_llm.tools.device.device_probe import has_cuda_device

    if has_cuda_device():
        pytest.skip("this machine has a GPU")
    m = model()
    opts = RunOptions(limits=Limits(n_candidates=2), runs_dir=tmp_path / "runs", learn=False, profile=False)
    out = start_run("softmax", None, opts, model_factory=lambda role: m, handle_signals=False)
    assert not out.finished and out.halt == "no_device" and m.calls == []
    assert run_info(RunDir(out.root)).state == "stopped"
