"""`cuda-llm optimize` / `cuda-llm resume`: errors come first and say what to do."""

from __future__ import annotations

import pytest

from cuda_llm.cli import main
from cuda_llm.commands.flags import parse_duration, parse_threshold, parse_tokens

NO_LLM_ENV = ("CUDA_LLM_MODEL", "CUDA_LLM_PLANNER_MODEL", "CUDA_LLM_CODER_MODEL", "CUDA_LLM_CRITIC_MODEL",
              "OPENAI_API_KEY", "OPENAI_BASE_URL", "CUDA_LLM_CONFIG")


@pytest.fixture
def no_llm(monkeypatch, tmp_path):
    for k in NO_LLM_ENV:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.chdir(tmp_path)  # no cuda-llm.toml here


def test_optimize_without_llm_fails_first_and_names_the_flags(no_llm, capsys, tmp_path):
    rc = main(["optimize", "no_such_task", "--runs-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "--model" in err and "CUDA_LLM_MODEL" in err and "OPENAI_BASE_URL" in err
    assert "no_such_task" not in err            # the LLM check runs before the task is even looked up
    assert not (tmp_path / "runs").exists()      # nothing was started


def test_optimize_bad_task_and_bad_budget(no_llm, monkeypatch, capsys):
    monkeypatch.setenv("CUDA_LLM_MODEL", "m")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert main(["optimize", "no_such_task"]) == 2
    assert "cuda-llm tasks" in capsys.readouterr().err
    assert main(["optimize", "softmax", "--time-budget", "1m", "--reserve", "2m"]) == 2
    assert "--reserve" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:              # a flag's value: one line from the flag parser
        main(["optimize", "softmax", "--candidates", "0"])
    assert exc.value.code == 2 and "argument --candidates: '0' is not a number of candidates" in capsys.readouterr().err


def test_resume_unknown_run_lists_what_exists(no_llm, capsys, tmp_path):
    (tmp_path / "runs").mkdir()
    assert main(["resume", "nope", "--runs-dir", str(tmp_path / "runs")]) == 2
    assert "cuda-llm optimize" in capsys.readouterr().err


def test_budget_parsers():
    assert parse_duration("45m") == 2700 and parse_duration("8h") == 28800 and parse_duration("90") == 90
    assert parse_threshold("2%") == pytest.approx(0.02) and parse_threshold("0.05") == 0.05
    assert parse_tokens("500k") == 500_000 and parse_tokens("2M") == 2_000_000
    import argparse

    for bad, fn in (("soon", parse_duration), ("150%", parse_threshold), ("lots", parse_tokens)):
        with pytest.raises(argparse.ArgumentTypeError):
            fn(bad)
