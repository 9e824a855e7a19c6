"""`eval`, `tune` and `profile` take the same task and kernel arguments and refuse bad ones alike (exit 2,
one message that says what to pass), before anything is compiled or run."""

from __future__ import annotations

import pytest

from cuda_llm.cli import main


@pytest.mark.parametrize("command", ["eval", "tune", "profile"])
def test_bad_task_and_kernel_arguments_get_the_same_answer(command, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    cases = [
        (["no_such_task", str(tmp_path / "k.cu")], ["no task named 'no_such_task'", "cuda-llm tasks"]),
        (["gelu", str(tmp_path / "missing.cu")], ["missing.cu does not exist", "solve(const float* x"]),
        (["gelu", str(tmp_path)], ["is a folder", "solve(const float* x"]),
    ]
    bad = tmp_path / "latin1.cu"
    bad.write_bytes(b"// caf\xe9\n")
    cases.append((["gelu", str(bad)], ["cannot read", "latin1.cu"]))
    for argv, needles in cases:
        assert main([command, *argv]) == 2, (command, argv)
        err = capsys.readouterr().err
        assert all(n in err for n in needles), (command, argv, err)
