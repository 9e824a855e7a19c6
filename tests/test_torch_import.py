"""PyTorch modules in, on the CPU (needs the torch extra; skipped without it): the sample imports, the
derived entry points, the reference against independent NumPy, declared shapes, every kind of bad file,
the import command, a module file where a task is expected, and the export's ModelNew without a GPU."""

from __future__ import annotations

import argparse
import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cuda_llm.tasks import load_task, load_task_folder  # noqa: E402
from cuda_llm.tasks.inputs import make_case_inputs, reference_outputs  # noqa: E402
from cuda_llm.tasks.torch_import import ImportOptions, derive, import_file, write_task_folder  # noqa: E402
from cuda_llm.tasks.torch_source import ModuleFileError  # noqa: E402
from cuda_llm.tools.harness import validate  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "torch" / "modules"
LEVEL1 = ["swish", "row_sum", "softmax_rows", "layer_norm", "matmul", "batched_matmul", "conv2d", "avg_pool",
          "cumsum_rows", "prelu", "row_stats", "embedding_bag", "argmax_rows"]
LEVEL2 = ["conv_bias_relu", "linear_gelu_scale", "linear_bn_tanh"]

SIGNATURES = {
    "swish": "const float* x, float* out, int batch_size, int features",
    "matmul": "const float* A, const float* B, float* out, int M, int K, int N",
    "row_stats": "const float* x, float* out0, float* out1, int rows, int cols",
    "embedding_bag": ("const long long* indices, const float* emb_weight, float* out, int batch_size, int bag_size, "
                      "int num_embeddings, int embedding_dim"),
    "argmax_rows": "const float* x, long long* out, int rows, int cols",
    "avg_pool": "const float* x, float* out, int n, int channels, int size, int out_dim2, int out_dim3",
    "linear_bn_tanh": ("const float* x, const float* fc_weight, const float* fc_bias, const float* bn_weight, "
                       "const float* bn_bias, const float* bn_running_mean, const float* bn_running_var, float* out, "
                       "int batch_size, int in_features, int out_features"),
    "conv_bias_relu": ("const float* x, const float* bias, const float* conv_weight, float* out, int batch_size, "
                       "int in_channels, int height, int width, int out_channels, int kernel_size, int out_dim2, "
                       "int out_dim3"),
}


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    out = tmp_path_factory.mktemp("sample")
    folders = {}
    for f in sorted(SAMPLE.glob("*.py")):
        folder, status = import_file(f, out)
        assert status == "written"
        folders[f.stem] = folder
    return folders


def test_the_sample_imports_with_derived_entry_points(sample):
    assert sorted(sample) == sorted(LEVEL1 + LEVEL2) and len(LEVEL1) >= 10 and len(LEVEL2) >= 3
    tasks = {n: load_task_folder(f).task for n, f in sample.items()}
    for name, args in SIGNATURES.items():
        assert tasks[name].signature == f'extern "C" void solve({args})', name
    fam = {n: t.family for n, t in tasks.items()}
    assert fam["matmul"] == fam["batched_matmul"] == "matmul" and fam["conv2d"] == "convolution"
    assert fam["softmax_rows"] == "reduction" and fam["cumsum_rows"] == "scan" and fam["avg_pool"] == "pooling"
    assert fam["layer_norm"] == "normalization" and fam["swish"] == "elementwise"
    assert fam["argmax_rows"] == fam["embedding_bag"] == "reduction"
    # BatchNorm's int64 counter is not read by forward: left out, not refused
    assert tasks["linear_bn_tanh"].torch.dropped_buffers == ["bn.num_batches_tracked"]
    assert tasks["row_stats"].torch.tuple_output and not tasks["swish"].torch.tuple_output
    assert tasks["avg_pool"].benchmark["out_dim2"] == 64                      # 128 / 2, computed per shape


def test_flops_from_the_flop_counter(sample):
    mm = load_task_folder(sample["matmul"]).task
    b = mm.benchmark
    assert mm.flops_at(b) == 2 * b["M"] * b["K"] * b["N"] and mm.bound == "compute"
    conv = load_task_folder(sample["conv_bias_relu"]).task
    b = conv.benchmark
    want = 2 * b["batch_size"] * b["out_channels"] * b["in_channels"] * 9 * b["out_dim2"] * b["out_dim3"]
    assert conv.flops_at(b) == want
    assert load_task_folder(sample["swish"]).task.flops_at({}) == 0


def _case(folder: Path, seed: int = 0, sizes=None):
    loaded = load_task_folder(folder)
    sizes = sizes or loaded.task.benchmark
    inputs = make_case_inputs(loaded, sizes, np.random.default_rng(seed))
    return loaded, inputs, reference_outputs(loaded, inputs, sizes)


def test_reference_is_the_module_checked_against_numpy(sample):
    _, i, r = _case(sample["swish"])
    x = i["x"].astype(np.float64)
    np.testing.assert_allclose(r["out"], x / (1 + np.exp(-1.5 * x)), rtol=1e-12, atol=1e-12)
    _, i, r = _case(sample["matmul"])
    np.testing.assert_allclose(r["out"], i["A"].astype(np.float64) @ i["B"].astype(np.float64), rtol=1e-10, atol=1e-9)
    _, i, r = _case(sample["prelu"])
    x, w = i["x"].astype(np.float64), i["act_weight"].astype(np.float64)
    assert ((w >= 0.05) & (w <= 0.3)).all()                                   # the module's own initialisation
    np.testing.assert_allclose(r["out"], np.where(x >= 0, x, w[None, :, None] * x), rtol=1e-12)
    _, i, r = _case(sample["row_stats"])
    np.testing.assert_allclose(r["out0"], i["x"].astype(np.float64).mean(axis=1), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(r["out1"], i["x"].max(axis=1))


def test_inputs_are_seeded_fresh_and_typed(sample):
    loaded, a, _ = _case(sample["layer_norm"], seed=3)
    _, b, _ = _case(sample["layer_norm"], seed=3)
    _, c, _ = _case(sample["layer_norm"], seed=4)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["x"], c["x"]) and not np.array_equal(a["norm_weight"], c["norm_weight"])
    assert a["x"].dtype == np.float32 and a["x"].shape == (4096, 1024) and a["norm_weight"].shape == (1024,)


def test_the_harness_check_catches_a_wrong_scan(sample):
    """The comparison the judge makes: an exclusive scan (the wrong kernel's answer) fails, the inclusive passes."""
    loaded, i, r = _case(sample["cumsum_rows"], sizes={"rows": 4, "length": 300})
    tol = loaded.task.tolerance_for(loaded.task.outputs[0])
    x = i["x"].astype(np.float32)
    inclusive = np.cumsum(x, axis=1, dtype=np.float32)
    exclusive = inclusive - x
    assert validate.compare_output("out", inclusive, r["out"], (tol.atol, tol.rtol), is_float=True)["passed"]
    bad = validate.compare_output("out", exclusive, r["out"], (tol.atol, tol.rtol), is_float=True)
    assert not bad["passed"] and bad["kind"] == "wrong_values"


def test_declared_shapes_complete_derived_sizes_and_numpy_agrees(tmp_path):
    f = SAMPLE / "conv_bias_relu.py"
    rec = derive(f, ImportOptions(), (["batch_size=2,height=9,width=7", "batch_size=1,in_channels=3,height=5,width=5",
                                       "out_channels=5"], ["height=11,width=6"]))
    folder, _ = write_task_folder(rec, tmp_path)
    task = load_task_folder(folder).task
    # the file's shape once, four varied, the three declared; two varied held out and the declared one
    assert task.torch.declared_shapes and len(task.shapes) == 1 + 4 + 3 and len(task.held_out) == 2 + 1
    small = task.shapes[5]
    assert (small["out_dim2"], small["out_dim3"]) == (7, 5) and task.held_out[2]["out_dim2"] == 9
    loaded, i, r = _case(folder, sizes=small)
    x, w, b = (i[k].astype(np.float64) for k in ("x", "conv_weight", "bias"))
    out = np.zeros((2, 32, 7, 5))
    for p in range(3):
        for q in range(3):
            out += np.einsum("nchw,kc->nkhw", x[:, :, p:p + 7, q:q + 5], w[:, :, p, q])
    np.testing.assert_allclose(r["out"], np.maximum(out + b[None, :, :, :].reshape(1, 32, 1, 1), 0), atol=1e-9)
    assert task.flops_at(small) == 2 * 2 * 32 * 16 * 9 * 7 * 5                  # counted at that shape


def test_dims_no_constant_names_are_computed_per_shape(tmp_path):
    f = tmp_path / "wide.py"
    f.write_text(_MODULE.format(body="return x.reshape(x.shape[0], -1, 2).sum(-1)",
                                inputs="torch.randn(batch, 3 * dim)", consts="batch = 4\ndim = 10"))
    rec = derive(f, ImportOptions(), (["dim=6"], ["dim=8,batch=2"]))
    dims = {t.name: t.dims for t in rec.tensors}
    assert dims["x"] == ["batch", "x_dim1"] and dims["out"] == ["batch", "out_dim1"]
    assert rec.shapes[-1]["x_dim1"] == 18 and rec.held_out[-1]["out_dim1"] == 12
    with pytest.raises(ModuleFileError, match="--shape \\{'dim': 5\\}: the module fails at these sizes"):
        derive(f, ImportOptions(), (["dim=5"], ["dim=8"]))


_MODULE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        {body}


{consts}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""

BAD = {
    "no_model": ("import torch\ndef get_inputs():\n    return [torch.randn(2)]\n", "no class Model"),
    "no_get_inputs": (_MODULE.format(body="return x", inputs="", consts="n = 2").replace("def get_inputs", "def _gi"),
                      "get_inputs\\(\\) is missing"),
    "not_tensor": (_MODULE.format(body="return x", inputs="'three'", consts="n = 2"),
                   "get_inputs\\(\\) returned a str at position 0"),
    "forward_fails": (_MODULE.format(body="return x @ x", inputs="torch.randn(n, 3)", consts="n = 2"),
                      "the dry run at the file's own sizes failed: RuntimeError"),
    "dict_output": (_MODULE.format(body="return {'y': x}", inputs="torch.randn(n)", consts="n = 2"),
                    "forward returned dict, not a tensor or a tuple of tensors"),
    "int8_input": (_MODULE.format(body="return x * 2", inputs="torch.randint(0, 5, (n,), dtype=torch.int8)",
                                  consts="n = 4"),
                   "input 'x' .* has dtype int8; the harness's buffers, poison values and checks exist for float32, "
                   "float16, int32, uint32, int64, uint8 only \\(convert it in the module with .int\\(\\)"),
    "float64_output": (_MODULE.format(body="return x.double()", inputs="torch.randn(n)", consts="n = 4"),
                       "output 0 of forward has dtype float64; .* with .float\\(\\)"),
    "random": (_MODULE.format(body="return torch.nn.functional.dropout(x, 0.5, training=True)",
                              inputs="torch.randn(n)", consts="n = 64"), "different outputs .* --eval-mode"),
    "syntax": ("def broken(:\n", "not valid Python"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_files_get_a_clear_error_naming_the_file(tmp_path, case):
    text, pattern = BAD[case]
    f = tmp_path / f"{case}.py"
    f.write_text(text)
    with pytest.raises(ModuleFileError, match=pattern) as err:
        derive(f)
    assert str(f) in str(err.value)


def test_bad_declared_shapes(tmp_path):
    with pytest.raises(ModuleFileError, match="not an int constant of the file; the file's constants are"):
        derive(SAMPLE / "swish.py", ImportOptions(), (["dims=3"], ["batch_size=2"]))
    with pytest.raises(ModuleFileError, match="need at least one held-out shape"):
        derive(SAMPLE / "swish.py", ImportOptions(), (["batch_size=3"], []))


def test_import_command_on_a_folder_keeps_going_and_keeps_edits(tmp_path, capsys):
    from cuda_llm.commands import import_cmd

    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(SAMPLE / "swish.py", src / "swish.py")
    (src / "broken.py").write_text(BAD["no_model"][0])
    p = argparse.ArgumentParser()
    import_cmd.add_arguments(p)
    args = p.parse_args(["kernelbench", str(src), "--out", str(tmp_path / "tasks")])
    assert import_cmd.run(args) == 1                    # one refused: exit 1, the other written
    out = capsys.readouterr()
    assert "1 of 2 imported" in out.out and "no class Model" in out.out
    assert load_task_folder(tmp_path / "tasks" / "swish").task.torch is not None
    assert import_cmd.run(args) == 1
    assert "unchanged" in capsys.readouterr().out


def test_a_module_file_works_where_a_task_is_expected(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    f = tmp_path / "my_swish.py"
    shutil.copy(SAMPLE / "swish.py", f)
    loaded = load_task(str(f))
    assert loaded.task.name == "my_swish" and str(tmp_path / "cache") in str(loaded.task.folder)
    again = load_task(str(f))
    assert again.task.folder == loaded.task.folder      # imported once, reused while the file is unchanged


def test_hard_coded_float32_falls_back_to_a_native_reference(tmp_path):
    g = tmp_path / "mixed.py"
    g.write_text(_MODULE.format(body="return torch.mm(x, torch.ones(x.shape[1], 2, dtype=torch.float32))",
                                inputs="torch.randn(n, 3)", consts="n = 8"))
    rec = derive(g)
    assert rec.reference_dtype == "native" and any("float64 failed" in n for n in rec.notes)


def test_export_model_new_has_the_same_state_and_refuses_cpu_tensors(sample, tmp_path):
    from cuda_llm.tasks.torch_export import export_files

    task = load_task_folder(sample["linear_bn_tanh"]).task
    ex = export_files(task, arch="sm_90", command="nvcc", origin="test")
    shutil.copy(Path(task.folder) / "module.py", tmp_path / "reference_module.py")
    for name, text in ex.files.items():
        (tmp_path / name).write_text(text)
    spec = importlib.util.spec_from_file_location(ex.module_name, tmp_path / f"{ex.module_name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    init = mod.get_init_inputs()
    ref, new = mod.Model(*init), mod.ModelNew(*init)
    assert list(new.state_dict()) == list(ref.state_dict())
    new.load_state_dict(ref.state_dict())
    inputs = mod.get_inputs()
    assert new._output_shapes(inputs) == [(256, 1024)]
    with pytest.raises(ValueError, match="contiguous CUDA float32 tensor"):
        new(*inputs)
