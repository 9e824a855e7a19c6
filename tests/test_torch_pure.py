"""PyTorch task source without PyTorch: the entry point, task.toml and the export derived from recorded
dry-run metadata, the task model's rules for PyTorch tasks, the loader's checks, the baseline labels, and
the commands' answer when PyTorch is missing. Runs in CI whether or not torch is installed."""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

import pytest

from cuda_llm.tasks import TaskError, load_task, load_task_folder
from cuda_llm.tasks.model import Task
from cuda_llm.tasks.torch_export import export_files, py_expr
from cuda_llm.tasks.torch_source import (ModuleRecord, TensorRecord, bytes_formula, c_name, render_toml, task_dict,
                                         task_name)

MODULE_TEXT = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """conv + bias + relu"""

    def __init__(self, c, k, r):
        super().__init__()
        self.conv = nn.Conv2d(c, k, r, bias=False)
        self.bias = nn.Parameter(torch.zeros(k, 1, 1))

    def forward(self, x):
        return torch.relu(self.conv(x) + self.bias)


N = 4
C = 3
H = 16
W = 12
K = 8
R = 3


def get_inputs():
    return [torch.randn(N, C, H, W)]


def get_init_inputs():
    return [C, K, R]
'''


def conv_record(**kw) -> ModuleRecord:
    """What the dry run of MODULE_TEXT records (written out by hand: no torch needed)."""
    tensors = [
        TensorRecord(name="x", role="input", source="x", dtype="float32", dims=["N", "C", "H", "W"]),
        TensorRecord(name="bias", role="weight", source="bias", kind="parameter", dtype="float32", dims=["K", 1, 1]),
        TensorRecord(name="conv_weight", role="weight", source="conv.weight", kind="parameter", dtype="float32",
                     dims=["K", "C", "R", "R"]),
        TensorRecord(name="out", role="output", source="output 0", dtype="float32", dims=["N", "K", "out_dim2", "out_dim3"]),
    ]
    base = dict(name="conv_relu", module_text=MODULE_TEXT, tensors=tensors, constants=["N", "C", "H", "W", "K", "R"],
                derived=["out_dim2", "out_dim3"],
                benchmark={"N": 4, "C": 3, "H": 16, "W": 12, "K": 8, "R": 3, "out_dim2": 14, "out_dim3": 10,
                           "fwd_flops": 2 * 4 * 8 * 3 * 9 * 14 * 10},
                flops="fwd_flops", family="convolution", ops=["convolution", "add", "relu"],
                tolerance={"float32": (1e-4, 1e-4)}, init_inputs="3, 8, 3")
    base.update(kw)
    return ModuleRecord(**base)


def test_names_are_c_identifiers_never_keywords_and_unique():
    taken: set[str] = set()
    assert c_name("conv.weight", taken) == "conv_weight"
    assert c_name("conv.weight", taken) == "conv_weight_2"
    assert c_name("float", taken) == "float_"
    assert c_name("0.weight", taken) == "t_0_weight"
    assert c_name("input", taken) == "input"
    assert task_name("19_ReLU") == "kb_19_relu"
    assert task_name("Conv2d__Bias-ReLU") == "conv2d_bias_relu"


def test_entry_point_from_recorded_metadata():
    data = task_dict(conv_record())
    task = Task.model_validate(data)
    assert task.signature == ('extern "C" void solve(const float* x, const float* bias, const float* conv_weight, '
                              'float* out, int N, int C, int H, int W, int K, int R, int out_dim2, int out_dim3)')
    assert [p.name for p in task.inputs] == ["x", "bias", "conv_weight"]
    assert all(p.generator.kind == "custom" for p in task.inputs)
    assert task.torch is not None and [w.key for w in task.torch.weights] == ["bias", "conv.weight"]
    # bytes: each tensor once; flops: the per-shape count; compute-bound by the counts at the file's sizes
    b = task.benchmark
    want_bytes = 4 * (4 * 3 * 16 * 12 + 8 + 8 * 3 * 9 + 4 * 8 * 14 * 10)
    assert task.bytes_at(b) == want_bytes
    assert task.flops_at(b) == b["fwd_flops"]
    # 8.6 flops per byte at these small sizes: memory-bound; more than 10 makes it compute-bound
    assert task.bound == "memory" and task.family == "convolution" and "fused" in task.tags
    big = conv_record(benchmark={**conv_record().benchmark, "fwd_flops": 11 * want_bytes})
    assert Task.model_validate(task_dict(big)).bound == "compute"
    assert task.tolerance_for(task.outputs[0]).atol == 1e-4
    # the file's own shape once per seed, nothing held out (none declared)
    assert len(task.shapes) == 3 and task.held_out == [] and all(s == task.shapes[0] for s in task.shapes)


def test_description_maps_every_pointer_and_shows_the_module():
    task = Task.model_validate(task_dict(conv_record()))
    for line in ("`x` float32[N, C, H, W]: forward() argument `x`",
                 "`conv_weight` float32[K, C, R, R]: the module's parameter `conv.weight`",
                 "`out` float32[N, K, out_dim2, out_dim3]: forward()'s result", "Model(3, 8, 3)", "training mode"):
        assert line in task.description
    assert "def forward(self, x):" in task.description


def test_toml_round_trip_gives_the_same_task():
    data = task_dict(conv_record())
    text = render_toml(data)
    parsed = tomllib.loads(text)
    assert Task.model_validate(parsed).model_dump() == Task.model_validate(data).model_dump()
    assert '"""' in text                      # the description stays readable, one line per line


def test_monomial_flops_and_literal_dims_in_bytes():
    rec = conv_record(flops="2 * N * K", benchmark={"N": 4, "C": 3, "H": 16, "W": 12, "K": 8, "R": 3,
                                                    "out_dim2": 14, "out_dim3": 10})
    task = Task.model_validate(task_dict(rec))
    assert task.flops_at(task.benchmark) == 64
    assert "fwd_flops" not in task.benchmark
    assert bytes_formula(rec).startswith("4 * N * C * H * W + 4 * K + ")    # literal 1s dropped from products


def test_declared_shapes_bring_back_the_held_out_rule():
    shape = {"N": 2, "C": 3, "H": 9, "W": 7, "K": 8, "R": 3, "out_dim2": 7, "out_dim3": 5, "fwd_flops": 1}
    data = task_dict(conv_record(shapes=[shape, shape], held_out=[]))
    with pytest.raises(ValueError, match="held_out: at least one held-out shape"):
        Task.model_validate(data)
    ok = task_dict(conv_record(shapes=[shape, shape], held_out=[shape]))
    task = Task.model_validate(ok)
    assert task.torch.declared_shapes and len(task.shapes) == 5 and len(task.held_out) == 1
    # a task that is not PyTorch keeps every rule
    plain = {k: v for k, v in ok.items() if k != "torch"}
    plain["shapes"] = plain["shapes"][:2]
    with pytest.raises(ValueError, match="at least 5 correctness shapes"):
        Task.model_validate(plain)


def test_torch_table_must_name_every_pointer():
    data = task_dict(conv_record())
    data["torch"]["weights"] = data["torch"]["weights"][:1]
    with pytest.raises(ValueError, match="must name every pointer parameter once"):
        Task.model_validate(data)
    data = task_dict(conv_record())
    data["torch"]["outputs"] = ["x"]
    with pytest.raises(ValueError, match="torch.outputs: 'x' is not an output pointer"):
        Task.model_validate(data)


def write_folder(tmp_path: Path, record: ModuleRecord | None = None) -> Path:
    from cuda_llm.tasks.torch_import import write_task_folder

    folder, status = write_task_folder(record or conv_record(), tmp_path)
    assert status == "written"
    return folder


def test_folder_loads_without_torch_and_guards_its_module(tmp_path):
    folder = write_folder(tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == ["module.py", "naive.cu", "reference.py", "task.toml"]
    loaded = load_task_folder(folder)
    assert loaded.task.baseline_label == "PyTorch eager" and loaded.task.library_label == "torch.compile"
    assert loaded.task.has_library and loaded.make_inputs is not None
    naive = (folder / "naive.cu").read_text()
    assert loaded.task.signature in naive and "no kernel yet" in naive
    (folder / "module.py").write_text(MODULE_TEXT.replace("N = 4", "N = 5"))
    with pytest.raises(TaskError, match="changed since the task was imported.*cuda-llm import kernelbench"):
        load_task_folder(folder)
    (folder / "module.py").unlink()
    with pytest.raises(TaskError, match="module.py .* is missing"):
        load_task_folder(folder)


def test_second_write_keeps_the_users_edits(tmp_path):
    from cuda_llm.tasks.torch_import import write_task_folder

    folder = write_folder(tmp_path)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("atol = 0.0001", "atol = 0.001"))
    assert write_task_folder(conv_record(), tmp_path)[1] == "unchanged"
    assert "atol = 0.001" in toml.read_text()
    other = conv_record(module_text=MODULE_TEXT + "\n# changed\n")
    with pytest.raises(FileExistsError, match="--force"):
        write_task_folder(other, tmp_path)
    assert write_task_folder(other, tmp_path, force=True)[1] == "written"


def test_a_plain_task_keeps_its_labels():
    task = load_task("gelu").task
    assert task.torch is None and task.baseline_label == "naive" and task.library_label == "library"
    assert not task.has_library and load_task("sgemm").task.has_library


# ------------------------------------------------------------------------------------------------ export
def test_py_expr_turns_formulas_into_python():
    assert py_expr("M + 1") == "s['M'] + 1"
    assert py_expr("ceil(n / 4) * max(a, 2)") == "math.ceil(s['n'] / 4) * max(s['a'], 2)"
    assert py_expr(7) == "7"
    s = {"M": 3, "n": 9, "a": 1}
    import math
    assert eval(py_expr("ceil(n / 4) * max(a, 2)"), {"math": math, "s": s}) == 6


def test_torch_export_text(tmp_path):
    task = load_task_folder(write_folder(tmp_path)).task
    ex = export_files(task, arch="sm_90", command="nvcc -arch=sm_90 kernel.cu -o kernel.so", origin="run r1")
    assert set(ex.files) == {"conv_relu_ext.py", "conv_relu_test.py", "README.md"}
    mod = ex.files["conv_relu_ext.py"]
    compile(mod, "conv_relu_ext.py", "exec")
    compile(ex.files["conv_relu_test.py"], "conv_relu_test.py", "exec")
    assert '@torch.library.custom_op("cuda_llm::conv_relu", mutates_args=())' in mod
    assert "def kernel_op(x: torch.Tensor, bias: torch.Tensor, conv_weight: torch.Tensor, shape_out: list[int])" in mod
    assert "WEIGHTS = [('bias', 'bias'), ('conv_weight', 'conv.weight')]" in mod
    assert "class ModelNew(Model):" in mod and "register_fake" in mod
    assert '"out_dim2": ["out", 2]' in mod                # derived sizes read off the output's shape
    readme = ex.files["README.md"]
    assert "ModelNew(3, 8, 3)" in readme and "nvcc -arch=sm_90 kernel.cu -o kernel.so" in readme


def test_function_export_for_builtin_tasks():
    for name, sig in (("sgemm", "def sgemm(A, B):"), ("histogram", "def histogram(x, *, bins):"),
                      ("spmv_csr", "def spmv_csr(row_ptr, col_idx, vals, x, *, M):")):
        ex = export_files(load_task(name).task, arch="sm_90", command="nvcc", origin="test")
        mod = ex.files[f"{name}_ext.py"]
        compile(mod, name, "exec")
        assert sig in mod, mod
        test = ex.files[f"{name}_test.py"]
        compile(test, name, "exec")
        assert "reference_outputs" in test and "task.shapes" in test and "held_out" not in test


# ------------------------------------------------------------------------------------- labels and hooks
def test_eval_rendering_names_eager_and_torch_compile(tmp_path):
    from cuda_llm.commands.eval_cmd import render_result, summarize
    from cuda_llm.results import EvalResult, Status, TimingResult

    task = load_task_folder(write_folder(tmp_path)).task

    def timed(ms: float, cand: str) -> EvalResult:
        t = TimingResult(sizes=task.benchmark, median_ms=ms, min_ms=ms, mean_ms=ms, iqr_ms=0.0, rse=0.001,
                         samples_ms=[ms], repetitions=1, stop_reason="rse")
        return EvalResult(task=task.name, candidate=cand, source_hash="h", status=Status.ok, timing=t)

    res = timed(0.5, "k.cu")
    summary = summarize(res, {"naive": timed(1.0, "pytorch-eager"), "library": timed(0.75, "torch.compile")}, task)
    text = render_result(res, summary, task)
    assert "speedup vs PyTorch eager" in text and "2.00x (PyTorch eager 1.000 ms)" in text
    assert "vs torch.compile" in text and "1.50x (torch.compile 750.0 us" in text


def test_report_headline_names_the_baselines():
    from cuda_llm.report.markdown import RunSummary, render_report

    s = RunSummary(task="swish", run_id="r", baseline_ms=1.0, best_candidate="r1c0", best_ms=0.5, library_ms=0.8,
                   baseline_label="PyTorch eager", library_label="torch.compile")
    text = render_report(s)
    assert "**Baseline (PyTorch eager)**: 1.0000 ms" in text or "Baseline (PyTorch eager)" in text
    assert "2.00x over PyTorch eager" in text and "**torch.compile**" in text and "1.60x over torch.compile" in text
    plain = render_report(RunSummary(task="gelu", run_id="r", baseline_ms=1.0, best_ms=0.5, best_candidate="c"))
    assert "Baseline (naive)" in plain and "over the baseline" in plain


def test_every_line_that_names_the_baseline_takes_the_tasks_label(tmp_path):
    """Task.baseline_label (PyTorch eager for a module, naive otherwise) reaches the console line, the trace
    timeline, the run table, the report's plot legend and the LLM's evidence; records without a label (runs
    from before it was kept) read as naive."""
    import io

    from cuda_llm.agents.context import ParentKernel
    from cuda_llm.report.progress import ConsoleProgress
    from cuda_llm.report.timeline import describe
    from cuda_llm.results import baseline_label

    eager = load_task_folder(write_folder(tmp_path)).task.baseline_label
    naive = load_task("gelu").task.baseline_label
    assert (eager, naive) == ("PyTorch eager", "naive")
    assert baseline_label({"label": eager}) == eager and baseline_label({}) == baseline_label(None) == "naive"
    assert baseline_label({"baseline_label": eager}, "baseline_label") == eager

    out = io.StringIO()
    pr = ConsoleProgress(out, clock=lambda: 0.0)
    pr.baseline(1.5, eager)
    pr.baseline(None, eager)
    pr.baseline(2.0)
    lines = [x.split("] ", 1)[1] for x in out.getvalue().splitlines()]
    assert lines == ["PyTorch eager baseline: 1.500 ms", "PyTorch eager baseline: not timed (no GPU result)",
                     "naive baseline: 2.000 ms"]

    assert describe({"event": "baseline", "status": "ok", "median_ms": 1.0, "label": eager}) == \
        "PyTorch eager baseline ok 1.000 ms"
    assert describe({"event": "baseline", "which": "library", "status": "ok", "median_ms": 0.5, "label": eager}) == \
        "library baseline ok 0.5000 ms"
    final = {"event": "final", "candidate": "r2c0", "status": "ok", "ms": 0.5, "baseline_ms": 1.0, "speedup": 2.0}
    assert "0.5000 ms vs PyTorch eager 1.000 ms (2.00x)" in describe({**final, "baseline_label": eager})
    assert "0.5000 ms vs naive 1.000 ms" in describe(final)

    head = ParentKernel(source="", median_ms=0.5, speedup=2.0, baseline_label=eager).render_head()
    assert "2.00x the PyTorch eager baseline" in head
    assert "2.00x the naive baseline" in ParentKernel(source="", median_ms=0.5, speedup=2.0).render_head()


def test_the_report_plot_takes_the_recorded_label():
    pytest.importorskip("plotly")
    from cuda_llm.report.html import ReportData, latency_figure
    from cuda_llm.report.markdown import RunSummary

    s = RunSummary(task="swish", run_id="r", baseline_ms=1.0, best_candidate="r1c0", best_ms=0.5, library_ms=0.8,
                   baseline_label="PyTorch eager", library_label="torch.compile")
    names = [t.name for t in latency_figure(ReportData(summary=s, round_best={1: 0.5})).data]
    assert "PyTorch eager baseline 1.000 ms" in names and "torch.compile 0.8000 ms" in names
    assert not any("naive" in n for n in names)
    plain = RunSummary(task="gelu", run_id="r", baseline_ms=1.0, best_candidate="c", best_ms=0.5, library_ms=0.8)
    names = [t.name for t in latency_figure(ReportData(summary=plain, round_best={1: 0.5})).data]
    assert "naive baseline 1.000 ms" in names and "library 0.8000 ms" in names


def test_baseline_of_a_torch_task_is_eager_not_naive_cu(tmp_path, monkeypatch):
    """Without a GPU the baseline hook answers no_device for PyTorch eager; it never runs the starting-point
    naive.cu (which computes nothing) as the baseline."""
    import cuda_llm.tools.device.device_probe as probe
    from cuda_llm.tools.harness.evaluate import baseline_result

    monkeypatch.setattr(probe, "has_cuda_device", lambda: False)
    loaded = load_task_folder(write_folder(tmp_path))
    eager = baseline_result(loaded, "naive")
    comp = baseline_result(loaded, "library")
    assert eager.candidate == "pytorch-eager" and eager.status.value == "no_device" and eager.compile is None
    assert comp.candidate == "torch.compile" and comp.status.value == "no_device"


# ----------------------------------------------------------------------------------- without PyTorch
@pytest.fixture
def no_torch(monkeypatch):
    """`import torch` fails, as on a machine without the extra."""
    for name in list(sys.modules):
        if name == "torch" or name.startswith("torch."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "torch", None)


def test_import_command_says_which_extra_without_torch(tmp_path, no_torch, capsys):
    from cuda_llm.commands import import_cmd

    f = tmp_path / "m.py"
    f.write_text(MODULE_TEXT)
    p = argparse.ArgumentParser()
    import_cmd.add_arguments(p)
    assert import_cmd.run(p.parse_args(["kernelbench", str(f), "--out", str(tmp_path / "out")])) == 2
    assert "pip install -e '.[torch]' in the cuda-llm checkout" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_module_file_as_task_says_which_extra_without_torch(tmp_path, no_torch, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    f = tmp_path / "m.py"
    f.write_text(MODULE_TEXT)
    with pytest.raises(TaskError, match=r"needs PyTorch: install PyTorch with: pip install -e '\.\[torch\]' in the cuda-llm checkout"):
        load_task(str(f))


def test_reference_without_torch_names_the_extra(tmp_path, no_torch):
    import numpy as np

    loaded = load_task_folder(write_folder(tmp_path))        # loading needs no torch
    with pytest.raises(ImportError, match=r"pip install -e '\.\[torch\]'"):
        loaded.make_inputs(loaded.task.benchmark, np.random.default_rng(0))


def test_import_command_refuses_bad_usage(tmp_path, capsys):
    from cuda_llm.commands import import_cmd

    p = argparse.ArgumentParser()
    import_cmd.add_arguments(p)
    assert import_cmd.run(p.parse_args(["kernelbench", str(tmp_path / "nope.py")])) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text("x = 1\n")
    assert import_cmd.run(p.parse_args(["kernelbench", str(tmp_path), "--shape", "x=2"])) == 2
    assert "apply to one file" in capsys.readouterr().err


def test_export_command_errors(tmp_path, capsys):
    from cuda_llm.commands import export_cmd
    from cuda_llm.runs.rundir import RunDir

    p = argparse.ArgumentParser()
    export_cmd.add_arguments(p)
    assert export_cmd.run(p.parse_args(["nope", "--torch", str(tmp_path / "o"), "--runs-dir", str(tmp_path)])) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    rd = RunDir.create(tmp_path / "runs", "gelu")
    rd.save_config({"task": "gelu"})
    args = p.parse_args([rd.run_id, "--torch", str(tmp_path / "o"), "--runs-dir", str(tmp_path / "runs")])
    assert export_cmd.run(args) == 2
    assert "has no kernel that passed" in capsys.readouterr().err


def test_varied_cases_are_odd_distinct_and_smaller():
    from cuda_llm.tasks.shape_cases import CASES, halved_case, odd_case, shrink

    values = {"N": 4096, "M": 4096, "K": 8192, "kernel_size": 3, "batch_size": 16}
    seen = set()
    for k in range(CASES):
        case = odd_case(values, k)
        assert "kernel_size" not in case                                  # small constants stay
        assert all(v % 2 == 1 and 3 <= v < values[c] for c, v in case.items())
        assert case["N"] != case["M"]                                     # equal sizes made different
        seen.add(tuple(sorted(case.items())))
        half = halved_case(values, k)
        assert all(values[c] % v == 0 and v <= 64 for c, v in half.items() if c != "batch_size")
    assert len(seen) == CASES
    small = {"a": 37, "b": 20}
    assert shrink(small) == {"a": 21, "b": 20} and shrink({"a": 3}) is None
