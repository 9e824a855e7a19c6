"""Task authoring: `cuda-llm check-task`, `cuda-llm tasks` with broken or missing task folders, and scalars of
every dtype reaching the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cuda_llm.cli import main

SAXPY = '''name = "{name}"
description = "y[i] = alpha * x[i] + z[i] for i < n. Every pointer is a device pointer."
family = "elementwise"
bound = "memory"
domain = "HPC"
bytes = "12 * n"
flops = "2 * n"

[[params]]
name = "x"
kind = "pointer"
dtype = "float32"
shape = ["n"]

[[params]]
name = "z"
kind = "pointer"
dtype = "float32"
shape = ["n"]

[[params]]
name = "y"
kind = "pointer"
dtype = "float32"
role = "output"
shape = ["n"]

[[params]]
name = "alpha"
kind = "scalar"
dtype = "float32"
value = "2.5"

[[params]]
name = "n"
kind = "scalar"
dtype = "int32"

[[shapes]]
n = 1
[[shapes]]
n = 7
[[shapes]]
n = 100
[[shapes]]
n = 1000
[[shapes]]
n = 4097
[[held_out]]
n = 333

[benchmark]
n = {bench}
'''

REFERENCE = '''import numpy as np

def reference(inputs, sizes):
    return {{"y": {body}}}
'''

NAIVE = '''#include <cuda_runtime.h>
__global__ void k(const float* x, const float* z, float* y, float alpha, int n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i] + z[i];
}
extern "C" void solve(const float* x, const float* z, float* y, float alpha, int n) {
    if (n <= 0) return;
    k<<<(n - 1) / 256 + 1, 256>>>(x, z, y, alpha, n);
}
'''
GOOD = 'inputs["alpha"] * inputs["x"].astype(np.float64) + inputs["z"]'


def make_task(root: Path, name: str = "saxpy", body: str = GOOD, bench: int = 67108864, naive: str = NAIVE) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "task.toml").write_text(SAXPY.format(name=name, bench=bench))
    (d / "reference.py").write_text(REFERENCE.format(body=body))
    (d / "naive.cu").write_text(naive)
    return d


def test_a_float_scalar_reaches_the_reference(tmp_path):
    from cuda_llm.tasks import load_task_folder
    from cuda_llm.tasks.inputs import make_case_inputs, reference_outputs

    seen = {}
    loaded = load_task_folder(make_task(tmp_path))
    inner = loaded.reference

    def spy(inputs, sizes):
        seen.update(inputs)
        return inner(inputs, sizes)

    object.__setattr__(loaded, "reference", spy)
    inputs = make_case_inputs(loaded, {"n": 5}, np.random.default_rng(0))
    out = reference_outputs(loaded, inputs, {"n": 5})
    assert seen["alpha"] == np.float32(2.5) and seen["alpha"].dtype == np.float32
    assert seen["n"] == 5 and seen["n"].dtype == np.int32
    np.testing.assert_allclose(out["y"], 2.5 * inputs["x"] + inputs["z"], rtol=1e-6)


def test_check_task_passes_a_good_task(tmp_path, capsys):
    rc = main(["check-task", str(make_task(tmp_path)), "--no-benchmark"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "ok    reference at shapes[4] n=4097" in out and "ok    reference at held_out[0] n=333" in out
    assert "ok    naive.cu: compiled and passed the static checks" in out


@pytest.mark.parametrize("body,words", [
    ('1 / 0 if sizes["n"] == 7 else inputs["x"]', "ZeroDivisionError"),
    ('np.full(sizes["n"], np.nan)', "NaN or Inf"),
    ('np.zeros(sizes["n"] + 1)', "has 2 elements"),
    ('np.random.rand(sizes["n"])', "deterministic"),
    ('np.array(["a"] * sizes["n"])', "dtype"),
])
def test_check_task_names_what_is_wrong_with_the_reference(tmp_path, capsys, body, words):
    rc = main(["check-task", str(make_task(tmp_path, body=body)), "--no-benchmark", "--no-compile"])
    out = capsys.readouterr().out
    assert rc == 1 and "FAIL  reference at shapes[" in out and words in out


def test_check_task_names_the_held_out_shape_that_fails_to_its_author(tmp_path, capsys):
    """The author wrote the held-out shapes: check-task names the one that fails and where the reference broke
    (only the model never sees them; tools/harness/failure_text.py words what it is told)."""
    body = '{"k": 1}["cols"] if sizes["n"] == 333 else inputs["alpha"] * inputs["x"] + inputs["z"]'
    rc = main(["check-task", str(make_task(tmp_path, body=body)), "--no-benchmark", "--no-compile"])
    out = capsys.readouterr().out
    assert rc == 1 and "ok    reference at shapes[0]" in out
    line = next(ln for ln in out.splitlines() if "held_out[0]" in ln)
    assert line.startswith("FAIL  reference at held_out[0] n=333 (")
    assert """): KeyError: 'cols' (reference.py line 4: return {"y": {"k": 1}["cols"] if sizes""" in line


def test_check_task_warns_about_a_small_benchmark_and_fails_a_broken_naive(tmp_path, capsys):
    rc = main(["check-task", str(make_task(tmp_path, bench=4096, naive=NAIVE.replace("alpha * x[i]", "alpha * q[i]")))])
    out = capsys.readouterr().out
    assert rc == 1
    assert "warn  the benchmark shape moves 0.0 MB" in out and "too little to fill a GPU" in out
    assert "FAIL  naive.cu:" in out and "compile_error" in out


def test_tasks_lists_the_good_and_names_the_bad(tmp_path, capsys, monkeypatch):
    make_task(tmp_path, "mine")
    bad = make_task(tmp_path, "broken")
    (bad / "reference.py").write_text("import numpy as np\ndef reference(inputs, sizes:\n")
    monkeypatch.setenv("CUDA_LLM_TASKS", str(tmp_path))
    rc = main(["tasks"])
    cap = capsys.readouterr()
    assert rc == 1
    assert "softmax" in cap.out and "mine" in cap.out and "broken" not in cap.out
    assert "not loaded:" in cap.err and "broken/reference.py" in cap.err and "SyntaxError" in cap.err
    assert "Traceback" not in cap.err


def test_a_missing_tasks_folder_is_an_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_TASKS", str(tmp_path / "nope"))
    assert main(["tasks"]) == 2
    assert "no such folder (given by $CUDA_LLM_TASKS)" in capsys.readouterr().err
    monkeypatch.delenv("CUDA_LLM_TASKS")
    assert main(["tasks", "--tasks-dir", str(tmp_path / "gone")]) == 2
    assert "given by --tasks-dir" in capsys.readouterr().err


def test_check_task_takes_a_task_name_as_optimize_does(capsys):
    rc = main(["check-task", "softmax", "--no-benchmark", "--no-compile"])
    out = capsys.readouterr().out
    assert rc == 0 and out.startswith("ok    softmax:") and "ready: `cuda-llm optimize softmax`" in out
    assert main(["check-task", "no_such_task_xyz", "--no-compile"]) == 2
    err = capsys.readouterr().err
    assert "no such folder and no task of that name" in err and "softmax" in err and len(err.strip().splitlines()) == 1
