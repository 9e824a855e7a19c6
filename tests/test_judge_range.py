"""The judge keeps up, without a GPU: the NumPy twins of tests/adversarial/scale/ judged whole (the real worker
loop on the NumPy test device, the real parent), on task copies with small benchmark shapes.

- The held-out cases scaled to the ends of the inputs' magnitudes reject kernels right only for the test
  draw, naming the scale, and accept their counterparts that scale their own inputs.
- Every timed call's outputs are compared with its set's reference: memos replaying one call in 2, 10 or
  100 are caught on every schedule seed, an honest kernel whose rounding changes from call to call never is.
The same kernels in CUDA, on the GPU: tests/test_judge_range_gpu.py."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from cuda_llm.results import Status
from cuda_llm.tasks import load_task, scale_cases
from cuda_llm.tasks.model import Magnitude, Param, Task
from cuda_llm.tools.harness.evaluate import EvalOptions, run_compiled
from cuda_llm.tools.harness.failure_text import case_failure
from cuda_llm.tools.harness.timing_budget import TimingBudget

HERE = Path(__file__).parent
KERNELS = HERE / "numpy_kernels"
WORKER = [sys.executable, str(HERE / "numpy_device_worker.py")]
SMALL = {"sgemm": "[benchmark]\nM = 192\nN = 160\nK = 128\n", "softmax": "[benchmark]\nrows = 64\ncols = 1000\n",
         "reduce_sum": "[benchmark]\nn = 262147\n", "gelu": "[benchmark]\nn = 200003\n"}


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path_factory.getbasetemp() / "range-cache"))


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> dict[str, Path]:
    """Copies of four tasks with benchmark shapes a CPU handles in milliseconds."""
    out = {}
    for name, bench in SMALL.items():
        folder = tmp_path_factory.mktemp("tasks") / name
        shutil.copytree(load_task(name).task.folder, folder)
        toml = (folder / "task.toml").read_text()
        (folder / "task.toml").write_text(re.sub(r"\[benchmark\][^\[]*", bench + "\n", toml, flags=re.S))
        out[name] = folder
    return out


def judge(folder: Path, kernel: str, work: Path, seed: int = 3, **budget):
    """clock_retries 3: the emulated kernels are slow NumPy code, and a busy two-core host lands an honest one
    outside the clock check's margin now and then (the check itself: tests/test_harness_session.py)."""
    src = KERNELS / f"{kernel}.py"
    b = TimingBudget(**{"time_budget_s": 2.0, "min_reps": 6, "max_reps": 24, "min_time_s": 0.0, "clock_retries": 3,
                        **budget})
    return run_compiled(load_task(folder), str(src), source=src.read_text(), options=EvalOptions(timeout_s=120.0, seed=seed, budget=b),
                        work_dir=work, candidate=kernel, worker_argv=WORKER)


@pytest.mark.parametrize("kernel,task", [("sgemm_fp16_split", "sgemm"), ("softmax_shift_first", "softmax"),
                                         ("reduce_sum_fp16_split", "reduce_sum")])
def test_a_kernel_right_only_for_the_draw_fails_at_a_scale_it_names(kernel, task, small, tmp_path):
    res = judge(small[task], kernel, tmp_path)
    assert res.status == Status.wrong_answer, res.message
    bad = res.validation.first_failure()
    assert bad is not None and bad.held_out and bad.scale, bad
    assert "a held-out shape with inputs scaled by 2^" in res.message, res.message
    assert str(bad.sizes) not in res.message                      # the shape stays held out


@pytest.mark.parametrize("kernel,task", [("sgemm_fp16_split_scaled", "sgemm"), ("sgemm_3xtf32", "sgemm"),
                                         ("softmax_rowmax", "softmax"), ("reduce_sum_fp16_split_scaled", "reduce_sum")])
def test_its_counterpart_that_scales_its_inputs_passes(kernel, task, small, tmp_path):
    res = judge(small[task], kernel, tmp_path)
    assert res.status == Status.ok, res.message
    assert sum(1 for c in res.validation.cases if c.scale) == 2
    assert res.timing is not None and res.timing.every_call_checked


@pytest.mark.slow
@pytest.mark.parametrize("period", [2, 10, 100])
def test_a_memo_replaying_one_call_in_p_is_caught_on_every_seed(period, small, tmp_path):
    """Every timed call is checked: the replay is caught whatever the schedule, not when a kept output
    happens to be one of its calls (a replayed call on the same set as the call before it is right, and
    enough timed calls are made for several replays)."""
    reps = max(24, 4 * period)
    for seed in range(5):
        res = judge(small["gelu"], f"gelu_replay_every_{period}", tmp_path / str(seed), seed=seed,
                    min_reps=reps, max_reps=reps, time_budget_s=30.0)
        assert res.status == Status.wrong_answer, (seed, res.message)
        assert "timed call" in res.message and "every timed call is checked" in res.message or "replayed" in res.message


@pytest.mark.slow
def test_an_honest_kernel_whose_rounding_changes_every_call_is_never_flagged(small, tmp_path):
    for seed in range(3):
        res = judge(small["gelu"], "gelu_rounding_noise", tmp_path / str(seed), seed=seed, min_reps=60, max_reps=60)
        assert res.status == Status.ok, (seed, res.message)


# ------------------------------------------------------------------------------- the rules, pure
def _task(**param) -> Task:
    x = {"name": "x", "kind": "pointer", "dtype": "float32", "shape": ["n"], **param}
    return Task(name="t", description="d", family="f", bound="memory", domain="AI",
                params=[x, {"name": "y", "kind": "pointer", "dtype": "float32", "role": "output", "shape": ["n"]},
                        {"name": "n", "kind": "scalar", "dtype": "int32"}],
                shapes=[{"n": i} for i in (1, 2, 3, 4, 5)], held_out=[{"n": 9}], benchmark={"n": 10}, bytes="8*n", flops="n")


def test_magnitude_forms_and_defaults():
    assert _task().magnitude_for(_task().inputs[0]) == Magnitude(low=1e-4, high=1e4)        # float32's default
    assert _task(magnitude=1e3).inputs[0].magnitude == Magnitude(low=1e-3, high=1e3)
    assert _task(magnitude=[0.5, 8]).inputs[0].magnitude == Magnitude(low=0.5, high=8)
    t = _task(magnitude=False)
    assert t.magnitude_for(t.inputs[0]) is None and t.magnitude_text() is None
    for bad in (True, 0.5, [3, 2], [1]):
        with pytest.raises(ValueError):
            _task(magnitude=bad)
    with pytest.raises(ValueError, match="float inputs"):
        Param(name="i", kind="pointer", dtype="int32", shape=["n"], magnitude=10)


def test_a_scaled_case_is_exact_and_its_tolerance_moves_with_the_output():
    t = _task()
    x = np.random.default_rng(0).uniform(-3, 3, 100).astype(np.float32)
    square = lambda inp: {"y": inp["x"].astype(np.float64) ** 2}          # noqa: E731  (degree 2, like a GEMM)
    made = scale_cases.make(t, {"x": x}, square({"x": x}), "high", square)
    assert made is not None and made.case.exponent == 11                  # 3 * 2^11 <= 1e4 < 3 * 2^12
    assert np.array_equal(made.inputs["x"], x * np.float32(2.0 ** 11))    # a power of two: exact
    assert made.atol_factor["y"] == pytest.approx(2.0 ** 22)
    low = scale_cases.make(t, {"x": x}, square({"x": x}), "low", square)
    assert low is not None and np.abs(low.inputs["x"]).max() <= 1e-4 and low.case.exponent < 0
    assert "2^" in low.case.text()


def test_a_scale_whose_reference_overflows_the_output_steps_toward_one():
    t = _task()
    x = np.full(4, 2.0, np.float32)
    cube = lambda inp: {"y": inp["x"].astype(np.float64) ** 12}            # noqa: E731  2^13 ** 12 overflows float32
    made = scale_cases.make(t, {"x": x}, cube({"x": x}), "high", cube)
    assert made is not None and made.case.exponent < 12 and np.isfinite(made.expected["y"]).all()
    assert float(np.abs(made.expected["y"]).max()) <= float(np.finfo(np.float32).max)
    never = lambda inp: {"y": np.full(4, np.inf)}                          # noqa: E731
    assert scale_cases.make(t, {"x": x}, {"y": np.ones(4)}, "high", never) is None


def test_the_prompt_line_and_the_failure_text_name_the_range_not_the_shape():
    t = _task(magnitude=[0.01, 100])
    assert "x from 0.01 to 100" in t.magnitude_text()
    from cuda_llm.results import CaseResult
    c = CaseResult(sizes={"n": 9}, held_out=True, passed=False, kind="nonfinite", scale="inputs scaled by 2^13 (largest |input| 8.19e+03)")
    text = case_failure(c)
    assert "2^13" in text and "n=9" not in text and "9" not in text.replace("8.19e+03", "")
