"""On a GPU machine: the doctor's machine checks pass, and a task whose naive baseline is broken stops the run
before any LLM call, with the real evaluator (nvcc, the GPU worker). The LLM is the scripted test model."""

from __future__ import annotations

import shutil

import pytest

from scripted_chat_model import ScriptedChatModel

from cuda_llm.cli import main

pytestmark = pytest.mark.gpu_long


def test_doctor_on_the_gpu_machine(capsys, tmp_path):
    rc = main(["doctor", "--no-llm", "--runs-dir", str(tmp_path / "runs")])
    out = capsys.readouterr().out
    print(out)
    lines = {ln.split()[1]: ln.split()[0] for ln in out.splitlines() if ln[:4] in ("ok  ", "warn", "FAIL")}
    assert lines["gpu"] == "ok" and lines["nvcc"] == "ok" and lines["disk"] in ("ok", "warn")
    assert rc == (1 if lines.get("ncu") == "FAIL" else 0)


def test_a_broken_baseline_stops_before_any_llm_call(tmp_path, monkeypatch):
    from cuda_llm.graph.run import RunOptions, start_run
    from cuda_llm.graph.state import Limits
    from cuda_llm.tasks.loader import SUITE_DIR

    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    task = tmp_path / "softmax"
    shutil.copytree(SUITE_DIR / "softmax", task)
    naive = (task / "naive.cu").read_text()
    (task / "naive.cu").write_text(naive.replace("expf(xr[c] - m) * inv", "0.5f * expf(xr[c] - m) * inv"))
    assert (task / "naive.cu").read_text() != naive
    model = ScriptedChatModel(replies=[])
    out = start_run(task, None, RunOptions(limits=Limits(n_candidates=1), runs_dir=tmp_path / "runs", learn=False,
                                           profile=False),
                    model_factory=lambda role: model, handle_signals=False)
    print(out.halt_text)
    assert not out.finished and out.halt == "baseline_failed" and model.calls == []
    assert "wrong" in out.halt_text
