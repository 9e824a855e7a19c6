"""Mistakes on the command line: one line each (no usage block), the same words for the same mistake in every
command, GPU choices checked against the machine by every command that takes them."""

from __future__ import annotations

import argparse
import shutil

import pytest

from cuda_llm.cli import build_parser, main
from cuda_llm.tasks.loader import SUITE_DIR


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _refused(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "usage:" not in err, err
    return err.strip()


def test_every_command_says_a_mistake_in_one_line(capsys):
    """A command added later gets the same treatment or this fails (commands.one_line_errors)."""
    commands = _subparsers()
    assert {"optimize", "resume", "tune", "stages"} <= set(commands)
    for name, p in commands.items():
        with pytest.raises(SystemExit) as exc:
            p.error("argument --x: 'y' is wrong")
        assert exc.value.code == 2
        assert capsys.readouterr().err == f"cuda-llm {name}: argument --x: 'y' is wrong (see `cuda-llm {name} --help`)\n"


def test_the_same_mistake_reads_the_same_in_every_command(capsys):
    said = {cmd: _refused(argv, capsys) for cmd, argv in (
        ("optimize", ["optimize", "softmax", "--rounds", "-1"]),
        ("resume", ["resume", "latest", "--rounds", "-1"]),
        ("batch", ["batch", "suite", "--rounds", "-1"]),
    )}
    for cmd, err in said.items():
        assert err == (f"cuda-llm {cmd}: argument --rounds: '-1' is not a number of rounds: give 1 or more "
                       f"(see `cuda-llm {cmd} --help`)")
    assert _refused(["resume", "latest", "--rounds", "+0"], capsys).startswith(
        "cuda-llm resume: argument --rounds: '0' is not a number of rounds: give 1 or more")
    assert "argument --candidates: '40' is not a number of candidates: give 1 to 16" in \
        _refused(["optimize", "softmax", "--candidates", "40"], capsys)
    for cmd in ("optimize", "resume"):
        args = ["softmax"] if cmd == "optimize" else ["latest"]
        assert f"cuda-llm {cmd}: argument --time-budget: '2x' is not a duration; write e.g. 600, 45m or 8h" in \
            _refused([cmd, *args, "--time-budget", "2x"], capsys)
        assert f"cuda-llm {cmd}: argument --gpus: --gpus 'a,b': 'a' is not a GPU index" in \
            _refused([cmd, *args, "--gpus", "a,b"], capsys)


def test_tune_checks_the_gpus_against_the_machine_even_without_one(tmp_path, capsys):
    kernel = tmp_path / "k.cu"
    kernel.write_text((SUITE_DIR / "softmax" / "naive.cu").read_text())
    assert main(["tune", "softmax", str(kernel), "--gpus", "99"]) == 2
    err = capsys.readouterr().err
    assert "--gpus: GPU 99 is not visible; this process sees" in err and len(err.strip().splitlines()) == 1


def test_features_takes_tasks_dir(tmp_path, capsys):
    folder = tmp_path / "tasks" / "my_softmax"
    shutil.copytree(SUITE_DIR / "softmax", folder)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace('name = "softmax"', 'name = "my_softmax"', 1))
    assert main(["features", "--task", "my_softmax", "--tasks-dir", str(tmp_path / "tasks"), "--arch", "sm_90"]) == 0
    assert "features for my_softmax on sm_90" in capsys.readouterr().out
    assert main(["features", "--task", "nope", "--tasks-dir", str(tmp_path / "tasks"), "--arch", "sm_90"]) == 2
    assert "no task named 'nope'" in capsys.readouterr().err


def test_batch_max_rounds_only_ends_a_resumed_batch(tmp_path, capsys):
    rc = main(["batch", "softmax", "--max-rounds", "1", "--runs-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "--max-rounds" in err and "--resume" in err, err
    assert not (tmp_path / "batches").exists()                # nothing started
