"""How a run's state is read without running it: the session rules on trace events, the checkpoint read
read-only, and the errors of `cuda-llm runs` / `cuda-llm report` (a killed and a stopped run are covered
with real processes in test_graph_resume.py)."""

from __future__ import annotations

import json

import pytest

from cuda_llm.cli import main
from cuda_llm.report.formats import fmt_ms
from cuda_llm.runs.run_info import lock_holder, read_values, run_info, session_state
from cuda_llm.runs.rundir import RunDir

START = {"event": "run_start"}
RESUME = {"event": "run_resume"}


@pytest.mark.parametrize("events, holder, want", [
    ([], None, ("not started", "")),
    ([START], None, ("killed", "the process ended without closing the run")),
    ([START, {"event": "error", "error": "OSError: disk full"}], None, ("killed", "OSError: disk full")),
    ([START, {"event": "run_end", "finished": True, "stop_reason": "plateau"}], None, ("finished", "plateau")),
    ([START, {"event": "run_end", "finished": False, "interrupted": True}], None,
     ("stopped", "stopped at a step boundary")),
    ([START, {"event": "run_end", "finished": False, "error": "endpoint down"}], None, ("failed", "endpoint down")),
    # a later session decides: killed after a resume of a stopped run, finished after a resume of a killed one
    ([START, {"event": "run_end", "interrupted": True}, RESUME], None, ("killed", "the process ended without closing the run")),
    ([START, {"event": "error", "error": "x"}, RESUME, {"event": "run_end", "finished": True, "stop_reason": "max_rounds"}],
     None, ("finished", "max_rounds")),
    ([START], "pid 42", ("running", "pid 42")),
])
def test_session_state(events, holder, want):
    assert session_state(events, holder) == want


def test_a_run_folder_without_checkpoint_or_lock(tmp_path):
    rd = RunDir.create(tmp_path / "runs", "softmax")
    rd.save_config({"task": "softmax"})
    assert read_values(rd) == {} and lock_holder(rd.root) is None
    info = run_info(rd)
    assert info.state == "not started" and info.task == "softmax" and info.best_id is None and not info.resumable
    rd.checkpoint_path.write_bytes(b"not a database")
    assert read_values(rd) == {}                      # a damaged file is no state, not a crash


def test_lock_holder_sees_a_live_lock(tmp_path):
    from cuda_llm.graph.run import _RunLock

    with _RunLock(tmp_path):
        assert (lock_holder(tmp_path) or "").startswith("pid ")
    assert lock_holder(tmp_path) is None


def test_runs_and_report_commands_on_bad_input(tmp_path, capsys):
    assert main(["runs", "--runs-dir", str(tmp_path / "nowhere")]) == 2
    assert "--runs-dir" in capsys.readouterr().err
    (tmp_path / "runs").mkdir()
    assert main(["runs", "--runs-dir", str(tmp_path / "runs")]) == 0
    assert "cuda-llm optimize" in capsys.readouterr().out
    assert main(["runs", "--runs-dir", str(tmp_path / "runs"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["report", "nope", "--runs-dir", str(tmp_path / "runs")]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    rd = RunDir.create(tmp_path / "runs", "gelu")
    rd.save_config({"task": "gelu"})
    assert main(["report", rd.run_id, "--runs-dir", str(tmp_path / "runs")]) == 2
    assert "no checkpoint yet" in capsys.readouterr().err


def test_runs_lists_a_finished_run_and_report_rewrites_its_report(tmp_path, tmp_path_factory, monkeypatch, capsys):
    from fake_gpu_evaluator import softmax_source
    from test_graph_loop import run, shared_cache

    monkeypatch.setenv("CUDA_LLM_CACHE", str(shared_cache(tmp_path_factory)))
    out, _, _ = run(tmp_path, [softmax_source(v) for v in ("v5", "v6", "v2", "v3")], max_rounds=2)
    runs = str(tmp_path / "runs")
    assert main(["runs", "--runs-dir", runs, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["run_id"] == out.run_id and row["state"] == "finished" and row["detail"] == "max_rounds"
    assert row["best_id"] == "r2c0" and row["speedup"] == pytest.approx(out.baseline["ms"] / out.final["ms"])
    assert row["baseline_label"] == "naive"                 # recorded at set-up from the task
    assert main(["runs", "--runs-dir", runs]) == 0
    table = capsys.readouterr().out
    assert "baseline ms" in table and f"naive {fmt_ms(out.baseline['ms'])}" in table
    (out.root / "report.md").unlink()
    assert main(["report", "latest", "--runs-dir", runs]) == 0
    printed = capsys.readouterr().out
    assert "state:       finished: max_rounds" in printed and "r2c0 *" in printed and "cuda-llm resume" not in printed
    report = (out.root / "report.md").read_text()
    assert "**r2c0**" in report and str(out.root / "best.cu") in report and "not finished" not in report
