"""One timing budget, carried whole: the TimingBudget a run is given is the one in the GPU worker's time
command and in the PyTorch timer's request, field for field. The messages are built by the real code path:
RunOptions -> the run's evaluator -> EvalOptions -> the judge -> the worker (the NumPy test double of the
device, tests/numpy_device_worker.py, in a real child process, which also has to obey the budget), and the
evaluator's baseline -> torch_baseline -> the request file the timer's child process reads. No GPU."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from cuda_llm.cli import build_parser
from cuda_llm.commands.flags import timing_budget
from cuda_llm.graph import run as run_mod
from cuda_llm.graph.run import RunOptions, saved_options
from cuda_llm.measure.evaluator import GpuEvaluator
from cuda_llm.tasks import load_task
from cuda_llm.tools.device import device_probe
from cuda_llm.tools.harness import runner, torch_baseline
from cuda_llm.tools.harness.eval_options import EvalOptions
from cuda_llm.tools.harness.evaluate import run_compiled
from cuda_llm.tools.harness.timing_budget import TimingBudget
from cuda_llm.tools.harness.torch_timer import TorchTimeRequest
from cuda_llm.tools.harness.worker_protocol import TimeCommand

HERE = Path(__file__).parent
WORKER = [sys.executable, str(HERE / "numpy_device_worker.py")]
KERNEL = HERE / "numpy_kernels" / "gelu_ok.py"
SAMPLE = HERE.parent / "examples" / "torch" / "modules"
# every field away from its default, so a field dropped or defaulted on the way shows
BUDGET = TimingBudget(time_budget_s=7.5, min_reps=4, max_reps=9, min_time_s=0.0, rse_target=1e-12, warmup=2,
                      timing_repeats=2, clock_retries=0, call_limit_s=30.0, naive_ms=0.25)


@pytest.fixture(autouse=True)
def _cpu_only(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(device_probe, "has_cuda_device", lambda: False)   # the plain evaluator, even on a GPU host


@pytest.fixture
def evaluator() -> GpuEvaluator:
    """What a run given BUDGET measures with (run.default_evaluator: no CUDA device, so no pool)."""
    ev = run_mod.default_evaluator(RunOptions(arch="sm_90", timing_budget=BUDGET))
    assert isinstance(ev, GpuEvaluator)
    return ev


def test_every_field_differs_from_the_default():
    default = TimingBudget()
    assert all(getattr(BUDGET, f) != getattr(default, f) for f in TimingBudget.model_fields)


def test_the_runs_budget_reaches_the_worker_unchanged_and_the_worker_obeys_it(evaluator, tmp_path, monkeypatch):
    assert evaluator.options.budget == BUDGET and evaluator.options.arch == "sm_90"
    folder = tmp_path / "gelu"                        # a benchmark shape a CPU handles in milliseconds
    shutil.copytree(load_task("gelu").task.folder, folder)
    toml = (folder / "task.toml").read_text()
    (folder / "task.toml").write_text(re.sub(r"\[benchmark\]\s*\nn = \d+", "[benchmark]\nn = 100003", toml))
    sent: list[dict] = []
    real_send = runner.WorkerSession.send

    def send(self, obj):
        sent.append(obj)
        return real_send(self, obj)

    monkeypatch.setattr(runner.WorkerSession, "send", send)
    res = run_compiled(load_task(folder), str(KERNEL), source=KERNEL.read_text(), options=evaluator.options,
                       work_dir=tmp_path / "work", candidate="gelu_ok", worker_argv=WORKER)
    times = [TimeCommand.model_validate(c) for c in sent if c.get("cmd") == "time"]
    assert len(times) == 1, res.message
    assert times[0].budget == BUDGET
    t = res.timing
    assert t is not None, res.message
    assert (t.repetitions, t.stop_reason) == (BUDGET.max_reps, "max_reps")   # the worker stopped by this budget


def test_the_runs_budget_reaches_the_pytorch_timer_unchanged(evaluator, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from cuda_llm.tasks import load_task_folder
    from cuda_llm.tasks.torch_import import import_file

    folder, status = import_file(SAMPLE / "swish.py", tmp_path / "tasks")
    assert status == "written"
    monkeypatch.setattr(device_probe, "has_cuda_device", lambda: True)        # torch_baseline asks the driver
    monkeypatch.setattr(torch_baseline, "_device_info", lambda gpu=None: None)
    requests: list[TorchTimeRequest] = []

    def run_worker(argv, *, timeout_s, gpu=None, lock=True):
        requests.append(TorchTimeRequest.model_validate_json(Path(argv[argv.index("--request") + 1]).read_text()))
        return runner.WorkerOutcome(rc=1, stdout="", stderr="not started: a test double", timed_out=False, seconds=0.0)

    monkeypatch.setattr(runner, "run_worker", run_worker)
    res = evaluator.baseline(load_task_folder(folder))         # a PyTorch task: its baseline is PyTorch eager
    assert "could not be timed" in res.message
    assert [r.which for r in requests] == ["eager"]
    assert requests[0].budget == BUDGET


def test_the_flags_map_into_the_budget_in_one_place():
    parser = build_parser()
    for argv in (["optimize", "softmax", "--eval-time", "4s"], ["eval", "softmax", "k.cu", "--eval-time", "4s"],
                 ["tune", "softmax", "k.cu", "--eval-time-budget", "4s"]):
        assert timing_budget(parser.parse_args(argv)) == TimingBudget(time_budget_s=4.0), argv
    assert timing_budget(parser.parse_args(["optimize", "softmax"])) == TimingBudget()          # default 10 s
    assert timing_budget(parser.parse_args(["tune", "softmax", "k.cu"])).time_budget_s == 3.0   # tune's default


def test_a_budget_knob_outside_the_budget_is_refused():
    with pytest.raises(ValueError, match="time_budget_s"):
        EvalOptions(time_budget_s=2.0)
    with pytest.raises(ValueError, match="min_rep"):
        TimingBudget(min_rep=3)


def test_options_saved_before_the_budget_was_one_model_still_load(tmp_path):
    old = {"options": {"runs_dir": "runs", "arch": "sm_90", "eval_time_budget_s": 2.5, "profile": False},
           "limits": {"max_rounds": 3}}
    got = saved_options(old, tmp_path)
    assert got.timing_budget == TimingBudget(time_budget_s=2.5) and got.arch == "sm_90" and not got.profile
    assert RunOptions(**old["options"]).timing_budget == TimingBudget(time_budget_s=2.5)    # a batch's run_options
    new = RunOptions(arch="sm_90", timing_budget=BUDGET)
    saved = {"options": new.model_dump(mode="json", exclude={"limits"}), "limits": {}}
    assert saved_options(saved, tmp_path).timing_budget == BUDGET
    recorded = sorted((HERE.parent / "cuda_llm" / "runs" / "recorded").glob("*/config.json"))     # the demo's runs
    assert recorded
    for path in recorded:
        config = json.loads(path.read_text())
        seconds = config["options"]["eval_time_budget_s"]
        assert saved_options(config, tmp_path).timing_budget == TimingBudget(time_budget_s=seconds), path
