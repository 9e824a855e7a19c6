"""Housekeeping commands and the small defects of issue 14: runs rm / --prune, features --reset, --version,
no BrokenPipe traceback, runs --json before the first run, the runs detail column, unknown cuda-llm.toml
tables, the stop reason's words, the trace's selection and stop lines, one name per budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_llm.cli import build_parser, main
from cuda_llm.runs.rundir import RunDir


def make_run(runs: Path, task: str, events: list[dict]) -> RunDir:
    rd = RunDir.create(runs, task)
    rd.save_config({"task": task})
    rd.trace_path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return rd


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("cuda-llm ")


def test_no_broken_pipe_traceback(tmp_path):
    env = {**os.environ, "CUDA_LLM_FEATURE_DB": str(tmp_path / "none.sqlite")}
    proc = subprocess.run(f"{sys.executable} -m cuda_llm.cli features --arch sm_90 | head -n 1", shell=True,
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.count("\n") == 1
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_runs_json_before_the_first_run(tmp_path, capsys):
    assert main(["runs", "--json", "--runs-dir", str(tmp_path / "none")]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_runs_detail_column_is_one_short_line(tmp_path, capsys):
    make_run(tmp_path, "gelu", [{"event": "run_start"}, {"event": "run_end", "finished": False,
                                                          "error": "boom " * 100}])
    assert main(["runs", "--runs-dir", str(tmp_path)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "gelu" in ln)
    assert "boom boom" in line and len(line) < 220


def test_runs_rm_and_prune(tmp_path, capsys):
    done = make_run(tmp_path, "gelu", [{"event": "run_start"}, {"event": "run_end", "finished": True,
                                                                 "stop_reason": "plateau"}])
    empty = make_run(tmp_path, "softmax", [{"event": "run_start"}])                  # killed before any round
    assert main(["runs", "--prune", "--runs-dir", str(tmp_path)]) == 1           # no terminal, no --yes: refused
    assert empty.root.is_dir() and "pass --yes" in capsys.readouterr().err
    assert main(["runs", "--prune", "--yes", "--runs-dir", str(tmp_path)]) == 0
    assert not empty.root.exists() and done.root.is_dir()
    capsys.readouterr()
    assert main(["runs", "rm", done.run_id, "--runs-dir", str(tmp_path), "--yes"]) == 0
    assert not done.root.exists()
    assert main(["runs", "rm", "nope", "--runs-dir", str(tmp_path), "--yes"]) == 2


def test_runs_rm_refuses_a_running_run(tmp_path, capsys):
    from cuda_llm.graph.run import _RunLock

    rd = make_run(tmp_path, "gelu", [{"event": "run_start"}])
    with _RunLock(rd.root):
        assert main(["runs", "rm", rd.run_id, "--runs-dir", str(tmp_path), "--yes"]) == 1
    assert rd.root.is_dir() and "is running" in capsys.readouterr().err


def test_features_reset(tmp_path, capsys):
    from cuda_llm.feature_db.stats import StatsStore

    db = tmp_path / "stats.sqlite"
    StatsStore(db).record(arch="sm_90", category="reduction", features=["warp_shuffle"], compiled=True, passed=True,
                          speedup_over_parent=2.0, key="run/r1c0/abc")
    assert main(["features", "--reset", "--db", str(db)]) == 1 and db.exists()      # not confirmed
    assert main(["features", "--reset", "--db", str(db), "--yes"]) == 0 and not db.exists()
    assert "deleted" in capsys.readouterr().out


def test_unknown_toml_table_is_refused(tmp_path):
    from cuda_llm.agents.errors import LLMConfigError
    from cuda_llm.agents.settings import load_settings

    cfg = tmp_path / "cuda-llm.toml"
    cfg.write_text('[llm]\nmodel = "m"\nbase_url = "http://x/v1"\n\n[lmm.coder]\nmodel = "typo"\n')
    with pytest.raises(LLMConfigError, match=r"unknown table.*lmm"):
        load_settings({}, env={}, config_path=cfg)


def test_stop_reason_words_carry_the_numbers():
    from cuda_llm.graph.state import Limits
    from cuda_llm.graph.stop_rules import reason_text

    text = reason_text("plateau", Limits(plateau_rounds=3, plateau_threshold=0.02))
    assert text == "the best latency did not improve by more than 2% for 3 rounds"
    assert "K rounds" not in text and not text.startswith("plateau")
    assert reason_text("max_rounds", Limits(max_rounds=7)) == "all 7 rounds were run"


def test_trace_lines_for_stop_and_an_empty_selection():
    from cuda_llm.report.timeline import describe

    stop = describe({"event": "decision", "kind": "stop", "reason": "plateau",
                     "text": "the best latency did not improve by more than 2% for 3 rounds"})
    assert stop.count("plateau") == 1
    empty = describe({"event": "decision", "kind": "selection", "round": 2, "replaced": False,
                      "why": "no candidate of this round passed"})
    assert "None" not in empty and "no candidate of this round passed" in empty


def test_one_name_per_budget():
    eval_help = build_parser().parse_args(["eval", "gelu", "k.cu", "--eval-time", "3"])
    assert eval_help.eval_time == 3.0 and not hasattr(eval_help, "time_budget")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["eval", "gelu", "k.cu", "--time-budget", "3"])   # wall-clock only, in optimize
    opt = build_parser().parse_args(["optimize", "gelu", "--time-budget", "2h", "--eval-time", "5"])
    assert opt.time_budget == 7200.0 and opt.eval_time == 5.0


def test_the_readme_lists_every_command():
    from cuda_llm.cli import COMMANDS

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme.split("| Command | What it does |", 1)[1].split("\n\n", 1)[0]
    missing = [name for name in COMMANDS if f"`cuda-llm {name}" not in table]
    assert not missing, f"README's command table lacks {missing}"
