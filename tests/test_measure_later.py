"""A run played wholly by hand (planner, coder and critic manual) is resumed where its answers are written, on a
machine without a GPU: it goes on through the answered turns to the next prompts, and halts, resumable and
having measured nothing, at its first new measurement; the GPU machine's resume then measures it. The GPU
machine is the test's fake evaluator; "this machine has no GPU" is an evaluator that needs a local device
on a machine where none is found (the test skips on a GPU machine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm.tools.device.device_probe import has_cuda_device

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(has_cuda_device(), reason="needs a machine without a CUDA device")]

TIMINGS = {"baseline": 10.0, "v5": 5.0, "v6": 6.0, "v3": 3.0}


def _fakes():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import fake_gpu_evaluator

    return fake_gpu_evaluator


class _LocalGpuEvaluator:
    """The fake GPU evaluator as the real one is on a machine without a GPU: measuring needs a local device."""

    def __new__(cls, log_path: Path):
        fakes = _fakes()
        ev = fakes.FakeGpuEvaluator(TIMINGS, log_path=log_path)
        ev.needs_local_device = True
        return ev


def _answer_all(root: Path, waiting: list[dict], answers: dict[str, str]) -> None:
    from cuda_llm.graph.manual import write_answer

    for w in waiting:
        write_answer(root, w["name"], answers.get(w["name"]) or answers[w["name"].split("-")[0]])


def test_a_manual_run_goes_on_without_a_gpu_until_it_must_measure(tmp_path):
    fakes = _fakes()
    from cuda_llm.agents.settings import load_settings
    from cuda_llm.graph.run import RunOptions, resume_run, settings_from_config, start_run
    from cuda_llm.graph.state import Limits
    from cuda_llm.runs.rundir import RunDir

    log = tmp_path / "evals.log"
    gpu = fakes.FakeGpuEvaluator(TIMINGS, log_path=log)
    manual = {"planner_provider": "manual", "coder_provider": "manual", "critic_provider": "manual"}
    opts = RunOptions(limits=Limits(n_candidates=2, max_rounds=2, plateau_rounds=5, compile_fix_turns=1),
                      runs_dir=tmp_path / "runs", stats_path=tmp_path / "stats.sqlite")
    out = start_run("softmax", load_settings(manual, env={}), opts, evaluator=gpu)    # on the GPU machine
    run_id, root = out.run_id, tmp_path / "runs" / out.run_id
    settings = settings_from_config(RunDir.open(run_id, tmp_path / "runs").load_config()["llm"])
    answers = {"planner": fakes.plan_answer(2), "critic": fakes.critic_answer(),
               "coder-r1c0": fakes.coder_answer(fakes.softmax_source("v5")),
               "coder-r1c1": fakes.coder_answer(fakes.softmax_source("v6"))}

    def measured() -> int:
        return len(log.read_text().splitlines()) if log.is_file() else 0

    # where the answers are written: each resume takes the answered turns and stops at the next prompts
    names: list[str] = []
    for _ in range(4):
        assert out.waiting and not out.halt, out
        names += [w["name"] for w in out.waiting]
        if out.waiting[0]["name"].startswith("coder"):
            break
        _answer_all(root, out.waiting, answers)
        before = measured()
        out = resume_run(run_id, tmp_path / "runs", settings=settings, evaluator=_LocalGpuEvaluator(log))
        assert measured() == before                      # nothing measured without the GPU
    assert names[0] == "critic-baseline" and any(n.startswith("planner") for n in names) and names[-2:] == ["coder-r1c0", "coder-r1c1"]

    # the coder's answers are in: the next step measures, so the run halts there, resumable, measuring nothing
    _answer_all(root, out.waiting, answers)
    before = measured()
    halted = resume_run(run_id, tmp_path / "runs", settings=settings, evaluator=_LocalGpuEvaluator(log))
    assert halted.halt == "no_device" and not halted.finished and not halted.waiting
    assert "needs the GPU to evaluate r1c0" in halted.halt_text and f"cuda-llm resume {run_id}" in halted.halt_text
    assert measured() == before and not (root / "cache" / "eval").is_dir() or not any((root / "cache" / "eval").iterdir())

    # on the GPU machine: round 1 is measured and the manual critic's prompt waits
    on_gpu = resume_run(run_id, tmp_path / "runs", settings=settings, evaluator=gpu)
    assert on_gpu.waiting and not on_gpu.halt
    evaluated = [c for c in (__import__("json").loads(x) for x in log.read_text().splitlines())
                 if c["kind"] == "evaluate"]
    assert {c["candidate"] for c in evaluated} == {"r1c0", "r1c1"}
