"""Task model and loader: valid tasks load, malformed ones are refused with file and field named."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from cuda_llm.tasks import TaskError, load_task, load_task_folder
from cuda_llm.tasks.formulas import FormulaError, evaluate
from cuda_llm.tasks.inputs import make_case_inputs, reference_outputs


def test_formulas_evaluate_arithmetic_and_refuse_code():
    assert evaluate("2 * rows * cols + max(rows, 3)", {"rows": 4, "cols": 5}) == 44
    with pytest.raises(FormulaError, match="unknown name"):
        evaluate("n + m", {"n": 1})
    with pytest.raises(FormulaError):
        evaluate("__import__('os').system('true')", {})


def _copy_gelu(tmp_path: Path) -> Path:
    dst = tmp_path / "gelu"
    shutil.copytree(load_task("gelu").task.folder, dst)
    return dst


def test_builtin_gelu_loads_with_signature():
    lt = load_task("gelu")
    assert lt.task.signature == 'extern "C" void solve(const float* x, float* y, int n)'
    sizes = lt.task.shapes[0]
    inputs = make_case_inputs(lt, sizes, np.random.default_rng(1))
    out = reference_outputs(lt, inputs, sizes)
    assert out["y"].shape == (sizes["n"],)


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda s: s.replace('bound = "memory"', 'bound = "fast"'), "bound"),
        (lambda s: s.replace('dtype = "float32"', 'dtype = "float33"', 1), "params.0.dtype"),
        (lambda s: s.replace("[[held_out]]\nn = 7\n", "").replace("[[held_out]]\nn = 1048579\n", ""), "held_out"),
        (lambda s: s.replace('bytes = "8 * n"', 'bytes = "8 * m"'), "missing sizes ['m']"),
        (lambda s: s.replace("[[shapes]]\nn = 1\n", ""), "at least 5"),
        (lambda s: s.replace('kind = "scalar"\ndtype = "int32"', 'kind = "scalar"\ndtype = "float16"'),
         "params.2: scalar parameter 'n': dtype float16 cannot be passed by value"),
    ],
)
def test_malformed_task_names_file_and_field(tmp_path, edit, field):
    folder = _copy_gelu(tmp_path)
    toml = folder / "task.toml"
    toml.write_text(edit(toml.read_text()))
    with pytest.raises(TaskError) as exc:
        load_task_folder(folder)
    assert str(toml) in str(exc.value)
    assert field in str(exc.value)


def test_missing_baseline_and_reference_are_named(tmp_path):
    folder = _copy_gelu(tmp_path)
    (folder / "naive.cu").unlink()
    with pytest.raises(TaskError, match="naive.cu"):
        load_task_folder(folder)
    folder = _copy_gelu(tmp_path / "b")
    (folder / "reference.py").write_text("def not_reference(): pass\n")
    with pytest.raises(TaskError, match="reference"):
        load_task_folder(folder)


def test_unknown_task_lists_known_ones():
    with pytest.raises(TaskError, match="known tasks: .*gelu"):
        load_task("no_such_task")


def test_user_folder_via_env(tmp_path, monkeypatch):
    folder = _copy_gelu(tmp_path)
    (folder.parent / "mygelu").mkdir()
    for f in folder.iterdir():
        shutil.copy(f, folder.parent / "mygelu" / f.name)
    t = folder.parent / "mygelu" / "task.toml"
    t.write_text(t.read_text().replace('name = "gelu"', 'name = "mygelu"'))
    monkeypatch.setenv("CUDA_LLM_TASKS", str(folder.parent))
    assert load_task("mygelu").task.name == "mygelu"
