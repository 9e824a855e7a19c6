"""The GPUs a run or a batch was started with (--gpus) are saved with it: `cuda-llm resume` and
`cuda-llm batch --resume` measure on them again, an explicit --gpus replaces them (saved, traced, said on the
console), and a saved GPU this machine does not have is refused before anything starts, in the words of the
--gpus check. On the CPU: a scripted model, test evaluators, and a machine that "has" as many GPUs as the
test says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_gpu_evaluator import FakeGpuEvaluator, softmax_source
from test_graph_loop import TIMINGS, scripted, shared_cache

import cuda_llm.graph.run as run_mod
from cuda_llm.graph.run import RunOptions, resume_run, start_run
from cuda_llm.graph.state import Limits

pytestmark = pytest.mark.slow     # whole graph runs / every suite build: `pytest -m "not slow"` leaves them out


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(shared_cache(tmp_path_factory)))


@pytest.fixture
def gpus_here(monkeypatch):
    """``gpus_here(n)``: this machine now shows ``n`` GPUs to the --gpus checks."""
    import cuda_llm.tools.device.device_probe as probe

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def set_count(n: int) -> None:
        monkeypatch.setattr(probe, "cuda_device_count", lambda: n)

    return set_count


@pytest.fixture
def built_on(monkeypatch):
    """The GPU selections the runs' default evaluators were built for (a test evaluator stands in for the pool)."""
    seen: list[Any] = []

    def default_evaluator(options: RunOptions) -> Any:
        seen.append(options.gpus)
        return FakeGpuEvaluator(TIMINGS)

    monkeypatch.setattr(run_mod, "default_evaluator", default_evaluator)
    return seen


def _start(tmp_path: Path, gpus: list[int] | None, settings: Any = None):
    model = scripted({"*": softmax_source("v5")}, n=1)
    opts = RunOptions(limits=Limits(n_candidates=1, max_rounds=1), runs_dir=tmp_path / "runs", learn=False, gpus=gpus)
    return start_run("softmax", settings, opts, evaluator=FakeGpuEvaluator(TIMINGS), model_factory=lambda r: model,
                     handle_signals=False)


def _events(root: Path, event: str) -> list[dict]:
    lines = (root / "trace.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, filter(None, lines)) if e["event"] == event]


def _config_gpus(root: Path) -> Any:
    return json.loads((root / "config.json").read_text())["options"]["gpus"]


def test_a_resumed_run_measures_on_its_saved_gpus_unless_told_otherwise(tmp_path, built_on):
    out = _start(tmp_path, [1, 2])
    assert out.finished and _config_gpus(out.root) == [1, 2]
    assert _events(out.root, "run_start")[0]["gpus_chosen"] == "1,2"
    model = scripted({}, n=1)

    def resume(**kw: Any) -> Any:
        return resume_run(out.run_id, tmp_path / "runs", model_factory=lambda r: model, handle_signals=False, **kw)

    resume()                                         # no choice given: the saved one
    assert built_on == [[1, 2]] and _events(out.root, "run_resume")[-1]["gpus_chosen"] == "1,2"
    assert not [e for e in _events(out.root, "decision") if e["kind"] == "gpus"]
    resume(gpus=[0])                                 # --gpus 0 replaces it, for this and later resumes
    changes = [e for e in _events(out.root, "decision") if e["kind"] == "gpus"]
    assert built_on[-1] == [0] and [(e["before"], e["after"]) for e in changes] == [("1,2", "0")]
    assert _config_gpus(out.root) == [0]
    resume()
    assert built_on[-1] == [0] and len([e for e in _events(out.root, "decision") if e["kind"] == "gpus"]) == 1
    resume(gpus=None)                                # --gpus all
    changes = [e for e in _events(out.root, "decision") if e["kind"] == "gpus"]
    assert built_on[-1] is None and (changes[-1]["before"], changes[-1]["after"]) == ("0", "all")
    assert _config_gpus(out.root) is None and _events(out.root, "run_resume")[-1]["gpus_chosen"] == "all"

    from cuda_llm.report.timeline import describe

    assert describe(changes[-1]) == "GPUs changed on resume: --gpus 0 -> all"


def test_a_run_saved_without_its_gpus_resumes_on_all_of_them(tmp_path, built_on):
    out = _start(tmp_path, None)
    cfg = json.loads((out.root / "config.json").read_text())
    del cfg["options"]["gpus"]                       # a run started before the choice was saved
    (out.root / "config.json").write_text(json.dumps(cfg))
    model = scripted({}, n=1)
    resume_run(out.run_id, tmp_path / "runs", model_factory=lambda r: model, handle_signals=False)
    assert built_on == [None] and not [e for e in _events(out.root, "decision") if e["kind"] == "gpus"]


# ------------------------------------------------------------------------------------------ cuda-llm resume
def _settings() -> Any:
    from cuda_llm.agents.settings import load_settings

    return load_settings({"model": "m1", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"})


def _resume_cli(out: Any, tmp_path: Path, *flags: str) -> int:
    return _resume_cli_id(out.run_id, tmp_path, *flags)


def _resume_cli_id(run_id: str, tmp_path: Path, *flags: str) -> int:
    from cuda_llm.cli import main

    return main(["resume", run_id, "--runs-dir", str(tmp_path / "runs"), "--api-key", "k", "--quiet", *flags])


@pytest.fixture
def preflight_passes(monkeypatch):
    """The machine's other checks (a GPU, nvcc, the endpoint) pass; only the GPU selection is checked."""
    from cuda_llm.commands import batch_cmd, resume_cmd

    for command in (resume_cmd, batch_cmd):
        monkeypatch.setattr(command, "preflight_ok", lambda *a, **kw: True)


def test_resume_refuses_a_saved_gpu_this_machine_does_not_have(tmp_path, capsys, gpus_here, built_on,
                                                               preflight_passes):
    out = _start(tmp_path, [0, 3], _settings())
    before = (out.root / "trace.jsonl").read_text()
    gpus_here(2)
    assert _resume_cli(out, tmp_path) == 2
    err = capsys.readouterr().err
    assert ("the GPUs this run was started with (--gpus 0,3): GPU 3 is not visible; this process sees GPUs 0-1" in err
            and f"cuda-llm resume {out.run_id} --gpus ..." in err), err
    assert built_on == [] and (out.root / "trace.jsonl").read_text() == before       # nothing started
    assert _resume_cli(out, tmp_path, "--gpus", "4") == 2                        # a new choice is checked too
    assert "--gpus: GPU 4 is not visible; this process sees GPUs 0-1" in capsys.readouterr().err
    # --gpus chooses GPUs it has: the run goes on there, and says so
    assert _resume_cli(out, tmp_path, "--gpus", "1") == 0
    err = capsys.readouterr().err
    assert "measuring on GPUs 1 (--gpus) from now on, not 0,3 as the run was started" in err
    assert built_on == [[1]] and _config_gpus(out.root) == [1]
    assert _resume_cli(out, tmp_path) == 0                                        # and keeps them
    assert "measuring on GPUs 1, as the run was started" in capsys.readouterr().err
    assert built_on == [[1], [1]]


# ------------------------------------------------------------------------------------------ cuda-llm batch
def test_a_resumed_batch_keeps_its_gpus_and_refuses_one_it_does_not_have(tmp_path, capsys, gpus_here, monkeypatch):
    from test_batch import cli, pool

    from cuda_llm.commands import batch_cmd
    from cuda_llm.graph.batch import load_state, open_batch

    asked: list[Any] = []

    def make_pool(**kw: Any) -> Any:
        asked.append(kw["gpus"])
        return pool(tmp_path, 0.01)

    monkeypatch.setattr(batch_cmd, "_make_pool", make_pool)
    gpus_here(2)
    assert cli(tmp_path, "softmax", "--rounds", "1", "--candidates", "1", "--gpus", "1") == 0
    root = open_batch("latest", tmp_path / "runs")
    state = load_state(root)
    assert asked == [[1]] and state.run_options["gpus"] == [1]
    assert _config_gpus(tmp_path / "runs" / state.tasks[0].run_id) == [1]        # each task's run keeps them too
    capsys.readouterr()

    assert cli(tmp_path, "--resume", state.batch_id) == 0                        # no choice: the saved one
    assert asked == [[1], [1]]
    gpus_here(1)                                                                  # now the machine has one GPU
    assert cli(tmp_path, "--resume", state.batch_id) == 2
    err = capsys.readouterr().err
    assert ("the GPUs this batch was started with (--gpus 1): GPU 1 is not visible; this process sees GPU 0" in err
            and f"cuda-llm batch --resume {state.batch_id} --gpus ..." in err), err
    assert asked == [[1], [1]]                                                   # refused before any pool
    assert cli(tmp_path, "--resume", state.batch_id, "--gpus", "0") == 0
    assert "measuring on GPUs 0 (--gpus) from now on, not 1 as the batch was started" in capsys.readouterr().err
    assert asked[-1] == [0] and load_state(root).run_options["gpus"] == [0]
    events = [json.loads(ln) for ln in (root / "batch.jsonl").read_text().splitlines() if ln.strip()]
    assert [e.get("gpus_chosen") for e in events if e["event"] in ("batch_start", "batch_resume")] == ["1", "1", "0"]
    run_id = state.tasks[0].run_id
    assert [(e["before"], e["after"], e["runs"]) for e in events if e.get("kind") == "gpus"] == [("1", "0", [run_id])]


def test_a_batch_resumed_with_other_gpus_moves_its_task_runs_there(tmp_path, capsys, gpus_here, built_on,
                                                                   preflight_passes):
    """The task runs the batch has begun (finished ones too) are saved with the new choice and trace it, so
    `cuda-llm resume RUN` measures there; a task not begun has no run to change; later resumes change nothing."""
    from test_batch import cli

    from cuda_llm.graph.batch import load_state, open_batch
    from cuda_llm.report.timeline import describe

    gpus_here(4)
    assert cli(tmp_path, "softmax,gelu", "--rounds", "1", "--candidates", "1", "--gpus", "1,2",
               "--time-budget", "1h") == 0
    root = open_batch("latest", tmp_path / "runs")
    state = load_state(root)
    runs = [tmp_path / "runs" / t.run_id for t in state.tasks]
    assert [_config_gpus(r) for r in runs] == [[1, 2], [1, 2]]
    # one task as if never begun (its run left aside), to show only begun runs are touched
    state.tasks[1].run_id, state.tasks[1].status = None, "pending"
    (root / "batch.json").write_text(state.model_dump_json(indent=1))

    assert cli(tmp_path, "--resume", state.batch_id, "--gpus", "3") == 0
    after = load_state(root)
    assert after.run_options["gpus"] == [3]
    assert _config_gpus(runs[0]) == [3] and _config_gpus(runs[1]) == [1, 2]      # the run the batch left aside
    changes = [e for e in _events(runs[0], "decision") if e["kind"] == "gpus"]
    assert [(e["before"], e["after"], e["batch"]) for e in changes] == [("1,2", "3", state.batch_id)]
    assert describe(changes[0]) == f"GPUs changed on batch {state.batch_id}'s resume: --gpus 1,2 -> 3"
    assert _config_gpus(tmp_path / "runs" / after.tasks[1].run_id) == [3]       # begun now, on the new choice

    assert cli(tmp_path, "--resume", state.batch_id) == 0                        # no --gpus: nothing changes
    assert len([e for e in _events(runs[0], "decision") if e["kind"] == "gpus"]) == 1
    capsys.readouterr()
    assert _resume_cli_id(state.tasks[0].run_id, tmp_path) == 0                  # the run resumed on its own
    assert "measuring on GPUs 3, as the run was started" in capsys.readouterr().err
    assert built_on[-1] == [3]


def test_a_batch_resume_leaves_a_busy_task_run_its_gpus_and_says_so(tmp_path, gpus_here):
    import os

    from test_batch import cli

    from cuda_llm.graph.batch import load_state, open_batch
    from cuda_llm.graph.run import _RunLock

    gpus_here(2)
    assert cli(tmp_path, "softmax", "--rounds", "1", "--candidates", "1", "--gpus", "1") == 0
    root = open_batch("latest", tmp_path / "runs")
    run = tmp_path / "runs" / load_state(root).tasks[0].run_id
    with _RunLock(run):                              # as if `cuda-llm resume RUN` were driving it now
        assert cli(tmp_path, "--resume", "latest", "--gpus", "0") == 0
    assert _config_gpus(run) == [1] and load_state(root).run_options["gpus"] == [0]
    assert not [e for e in _events(run, "decision") if e["kind"] == "gpus"]
    events = [json.loads(ln) for ln in (root / "batch.jsonl").read_text().splitlines() if ln.strip()]
    change = [e for e in events if e.get("kind") == "gpus"]
    assert len(change) == 1 and change[0]["runs"] == []
    assert f"is being run by pid {os.getpid()}" in change[0]["runs_kept"][run.name]
