"""PyTorch tasks on a GPU (marked gpu; need the torch extra with CUDA): the sample imported, PyTorch eager and
torch.compile timed by the harness's rules, hand-written kernels judged (two wrong, caught: a wrong scan, and
an int64 output written as int32), and the export round trip (ModelNew against Model, int64 indices in and
out, and a built-in task's function) through the generated tests."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from cuda_llm.tasks import load_task_folder  # noqa: E402
from cuda_llm.tasks.torch_import import import_file  # noqa: E402
from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate  # noqa: E402
from cuda_llm.tools.harness.timing_budget import TimingBudget  # noqa: E402

pytestmark = pytest.mark.gpu_long

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "torch" / "modules"
KERNELS = ROOT / "examples" / "torch" / "kernels"
FAST = EvalOptions(budget=TimingBudget(time_budget_s=2.0, min_time_s=0.2))


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch build has no CUDA")
    out = tmp_path_factory.mktemp("torch-sample")
    return {f.stem: import_file(f, out)[0] for f in sorted(SAMPLE.glob("*.py"))}


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def test_sample_imports(sample):
    assert len(sample) == 16
    for folder in sample.values():
        assert load_task_folder(folder).task.torch is not None


@pytest.mark.parametrize("module", ["softmax_rows", "argmax_rows"])
def test_eager_and_torch_compile_are_timed(sample, module):
    """argmax_rows: PyTorch's own int64 output is checked exactly against the reference too."""
    from cuda_llm.tools.harness.torch_baseline import torch_baseline

    loaded = load_task_folder(sample[module])
    eager = torch_baseline(loaded, "eager", FAST)
    comp = torch_baseline(loaded, "compile", FAST)
    for res, label in ((eager, "pytorch-eager"), (comp, "torch.compile")):
        assert res.status.value == "ok", res.message
        assert res.candidate == label and res.timing.median_ms > 0 and res.timing.repetitions >= 10
        assert res.validation.passed                                  # its own output within the tolerance
        assert res.timing.pct_of_sol is None or 0 < res.timing.pct_of_sol < 125
    print(f"\n{module}: eager {eager.timing.median_ms:.4f} ms, torch.compile {comp.timing.median_ms:.4f} ms")
    again = torch_baseline(loaded, "eager", FAST)                     # cached per device
    assert again.timing.median_ms == eager.timing.median_ms


@pytest.mark.parametrize("module, kernel, status, kind", [
    ("swish", "swish.cu", "ok", None),
    ("softmax_rows", "softmax_rows.cu", "ok", None),
    ("conv_bias_relu", "conv_bias_relu.cu", "ok", None),
    ("row_stats", "row_stats.cu", "ok", None),
    ("embedding_bag", "embedding_bag.cu", "ok", None),                  # int64 indices in
    ("argmax_rows", "argmax_rows.cu", "ok", None),                      # int64 indices out, checked exactly
    ("cumsum_rows", "cumsum_rows_wrong.cu", "wrong_answer", "wrong_values"),
    ("argmax_rows", "argmax_rows_int32_wrong.cu", "wrong_answer", "unwritten"),   # the 64-bit poison survives
])
def test_hand_written_kernels_are_judged(sample, module, kernel, status, kind):
    loaded = load_task_folder(sample[module])
    res = evaluate_candidate(loaded, (KERNELS / kernel).read_text(), candidate=kernel, options=FAST)
    assert res.status.value == status, res.message
    if status == "ok":
        # every shown case and every held-out shape the import derived
        assert res.validation.n_passed == len(loaded.task.shapes) + len(loaded.task.held_out) > len(loaded.task.shapes)
        assert res.timing.median_ms > 0
    else:
        assert res.validation.first_failure().kind == kind


def _run_dir(tmp_path: Path, task_ref: str) -> str:
    from cuda_llm.runs.rundir import RunDir

    rd = RunDir.create(tmp_path / "runs", "export")
    rd.save_config({"task": task_ref})
    return rd.run_id


def _export(tmp_path: Path, task_ref: str, kernel: Path, out: Path) -> None:
    from cuda_llm.commands import export_cmd

    p = argparse.ArgumentParser()
    export_cmd.add_arguments(p)
    run_id = _run_dir(tmp_path, task_ref)
    assert export_cmd.run(p.parse_args([run_id, "--torch", str(out), "--runs-dir", str(tmp_path / "runs"),
                                        "--kernel", str(kernel)])) == 0


def test_export_round_trip_model_new_against_model(sample, tmp_path):
    out = tmp_path / "swish_export"
    _export(tmp_path, str(sample["swish"]), KERNELS / "swish.cu", out)
    got = subprocess.run([sys.executable, "-m", "pytest", "-q", str(out / "swish_test.py")], capture_output=True,
                         text=True, cwd=out)
    assert got.returncode == 0, got.stdout + got.stderr
    assert "3 passed" in got.stdout
    # and in this process: fresh inputs, ModelNew against Model on the GPU
    sys.path.insert(0, str(out))
    try:
        import swish_ext
    finally:
        sys.path.remove(str(out))
    model = swish_ext.Model(*swish_ext.get_init_inputs()).cuda()
    new = swish_ext.ModelNew(*swish_ext.get_init_inputs()).cuda()
    x = torch.randn(33, 517, device="cuda")                           # not the file's sizes
    torch.testing.assert_close(new(x), model(x), atol=1e-4, rtol=1e-4)


def test_export_round_trip_tuple_outputs_and_weights(sample, tmp_path):
    out = tmp_path / "conv_export"
    _export(tmp_path, str(sample["conv_bias_relu"]), KERNELS / "conv_bias_relu.cu", out)
    got = subprocess.run([sys.executable, "-m", "pytest", "-q", str(out / "conv_bias_relu_test.py")],
                         capture_output=True, text=True, cwd=out)
    assert got.returncode == 0, got.stdout + got.stderr
    out2 = tmp_path / "stats_export"
    _export(tmp_path, str(sample["row_stats"]), KERNELS / "row_stats.cu", out2)
    got = subprocess.run([sys.executable, "-m", "pytest", "-q", str(out2 / "row_stats_test.py")],
                         capture_output=True, text=True, cwd=out2)
    assert got.returncode == 0, got.stdout + got.stderr


@pytest.mark.parametrize("module", ["embedding_bag", "argmax_rows"])
def test_export_round_trip_int64_inputs_and_outputs(sample, tmp_path, module):
    """int64 indices into ModelNew (embedding_bag) and out of it (argmax_rows, compared exactly)."""
    out = tmp_path / f"{module}_export"
    _export(tmp_path, str(sample[module]), KERNELS / f"{module}.cu", out)
    got = subprocess.run([sys.executable, "-m", "pytest", "-q", str(out / f"{module}_test.py")], capture_output=True,
                         text=True, cwd=out)
    assert got.returncode == 0, got.stdout + got.stderr
    assert "3 passed" in got.stdout


def test_export_of_a_builtin_task_is_a_function(tmp_path):
    from cuda_llm.tasks import load_task

    naive = load_task("gelu").task.baseline_path
    out = tmp_path / "gelu_export"
    _export(tmp_path, "gelu", naive, out)
    got = subprocess.run([sys.executable, "-m", "pytest", "-q", str(out / "gelu_test.py")], capture_output=True,
                         text=True, cwd=out)
    assert got.returncode == 0, got.stdout + got.stderr
