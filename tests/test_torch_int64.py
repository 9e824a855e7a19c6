"""int64 (torch.long) tensors end to end on the CPU (needs the torch extra; skipped without it): the sample's
index modules (embedding_bag takes int64 indices, argmax_rows returns them) get 64-bit pointers, inputs
that stay valid indices at every size, an exact int64 reference and check, a worker-side poison that an
int32-sized write leaves visible, and an export whose ModelNew and test speak int64. The judge runs them
end to end on the NumPy test device (tests/numpy_device_worker.py)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cuda_llm.results import Status  # noqa: E402
from cuda_llm.tasks import load_task_folder  # noqa: E402
from cuda_llm.tasks.inputs import make_case_inputs, reference_outputs  # noqa: E402
from cuda_llm.tasks.torch_import import ImportOptions, derive, import_file, write_task_folder  # noqa: E402
from cuda_llm.tools.harness import validate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "torch" / "modules"
HERE = Path(__file__).parent
WORKER = [sys.executable, str(HERE / "numpy_device_worker.py")]


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    out = tmp_path_factory.mktemp("int64")
    return {n: import_file(SAMPLE / f"{n}.py", out)[0] for n in ("embedding_bag", "argmax_rows")}


def _case(folder: Path, seed: int = 0, sizes=None):
    loaded = load_task_folder(folder)
    sizes = sizes or loaded.task.benchmark
    inputs = make_case_inputs(loaded, sizes, np.random.default_rng(seed))
    return loaded, inputs, reference_outputs(loaded, inputs, sizes)


def test_index_tensors_get_64_bit_pointers_and_exact_tolerances(tasks):
    from cuda_llm.tools.compiler.static_check import check_signature

    emb = load_task_folder(tasks["embedding_bag"]).task
    arg = load_task_folder(tasks["argmax_rows"]).task
    assert emb.signature == ('extern "C" void solve(const long long* indices, const float* emb_weight, float* out, '
                             'int batch_size, int bag_size, int num_embeddings, int embedding_dim)')
    assert arg.signature == 'extern "C" void solve(const float* x, long long* out, int rows, int cols)'
    out = arg.outputs[0]
    assert out.dtype.value == "int64" and out.dtype.itemsize == 8 and not out.dtype.is_float
    assert arg.tolerance_for(out).atol == 0 and arg.tolerance_for(out).rtol == 0
    assert arg.bytes_at(arg.benchmark) == 4 * 8192 * 1024 + 8 * 8192            # 8 bytes per index moved
    # a kernel may spell the type int64_t; an int32 pointer is the wrong entry point
    body = "{ }"
    assert check_signature(f'extern "C" void solve(const float* x, int64_t* out, int rows, int cols) {body}', arg) == []
    bad = check_signature(f'extern "C" void solve(const float* x, int* out, int rows, int cols) {body}', arg)
    assert bad and "long long*" in bad[0].message


def test_index_inputs_stay_valid_indices_at_every_size(tasks, tmp_path):
    """get_inputs() draws the indices at each case's sizes (the file's constants set first), so a declared
    shape with a 7-row table gets indices below 7; the reference is the table's rows, averaged."""
    loaded, i, r = _case(tasks["embedding_bag"])
    idx, table = i["indices"], i["emb_weight"]
    assert idx.dtype == np.int64 and idx.shape == (4096, 16) and 0 <= idx.min() and idx.max() < 50000
    np.testing.assert_allclose(r["out"], table.astype(np.float64)[idx].mean(axis=1), rtol=1e-12, atol=1e-12)
    rec = derive(SAMPLE / "embedding_bag.py", ImportOptions(),
                 (["num_embeddings=7,batch_size=5", "bag_size=3,embedding_dim=9"], ["num_embeddings=11,bag_size=2"]))
    folder, _ = write_task_folder(rec, tmp_path)
    task = load_task_folder(folder).task
    for sizes in task.shapes + task.held_out:
        _, i, r = _case(folder, sizes=sizes)
        assert i["indices"].shape == (sizes["batch_size"], sizes["bag_size"])
        assert i["indices"].max() < sizes["num_embeddings"] and i["indices"].min() >= 0
        np.testing.assert_allclose(r["out"], i["emb_weight"].astype(np.float64)[i["indices"]].mean(axis=1),
                                   rtol=1e-12, atol=1e-12)


def test_an_int64_output_is_checked_exactly_and_an_int32_write_is_unwritten(tasks):
    loaded, i, r = _case(tasks["argmax_rows"], seed=5)
    want = r["out"]
    assert want.dtype == np.int64 and np.array_equal(want, np.argmax(i["x"], axis=1))
    tol = loaded.task.tolerance_for(loaded.task.outputs[0])
    tol = (float(tol.atol), float(tol.rtol))
    assert validate.compare_output("out", want.copy(), want, tol, is_float=False)["passed"]
    near = want.copy()
    near[100] = (near[100] + 1) % 1024                                        # one index off by one
    bad = validate.compare_output("out", near, want, tol, is_float=False)
    assert not bad["passed"] and bad["kind"] == "wrong_values" and bad["first_bad_index"] == [100]
    # the device buffer as the worker poisons it, then written as if it held int32 (`int* out`)
    buf = validate.poisoned(want.shape, np.int64)
    buf.view(np.int32)[:want.size] = want
    half = validate.compare_output("out", buf, want, tol, is_float=False)
    assert not half["passed"] and half["kind"] == "unwritten"
    assert f"{want.size // 2} of {want.size} elements never written" in half["reason"]


def test_an_int64_buffer_that_forward_reads_is_passed_to_the_kernel(tmp_path):
    """An index buffer (register_buffer of torch.long) is a const long long* weight, and the reference
    uses the one the kernel got; BatchNorm's counter, which forward never reads, stays out (test_torch_import)."""
    f = tmp_path / "permute.py"
    f.write_text(_PERMUTE)
    rec = derive(f)
    folder, _ = write_task_folder(rec, tmp_path / "tasks")
    task = load_task_folder(folder).task
    assert task.signature == 'extern "C" void solve(const float* x, const long long* perm, float* out, int n, int d)'
    assert task.torch.dropped_buffers == ["steps"]                             # an int64 counter no output reads
    loaded, i, r = _case(folder)
    assert i["perm"].dtype == np.int64 and sorted(i["perm"]) == list(range(64))
    np.testing.assert_array_equal(r["out"], i["x"][:, i["perm"]])
    i["perm"] = i["perm"][::-1].copy()                                       # the kernel's weights are used
    np.testing.assert_array_equal(reference_outputs(loaded, i, task.benchmark)["out"], i["x"][:, i["perm"]])


_PERMUTE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.register_buffer("perm", torch.randperm(d))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        return x[:, self.perm]


n = 32
d = 64


def get_inputs():
    return [torch.randn(n, d)]


def get_init_inputs():
    return [d]
"""


def test_an_integer_output_float64_decides_differently_is_noted(tmp_path):
    """All ties in float32 (argmax 0), none in float64: the import says so, since the check is exact."""
    f = tmp_path / "ties.py"
    f.write_text(_PERMUTE.replace("return x[:, self.perm]", "return torch.argmax(1.0 + 1e-9 * x, dim=1)"))
    rec = derive(f)
    assert any("differs from the float64 reference" in n and "--native-reference" in n for n in rec.notes), rec.notes
    plain = tmp_path / "plain.py"
    plain.write_text(_PERMUTE.replace("return x[:, self.perm]", "return torch.argmax(x, dim=1)"))
    assert not any("float64 reference" in n for n in derive(plain).notes)


def test_unsupported_dtypes_say_what_to_convert_to(tmp_path):
    from cuda_llm.tasks.torch_source import ModuleFileError

    f = tmp_path / "small_ints.py"
    f.write_text(_PERMUTE.replace("return x[:, self.perm]", "return x.to(torch.int8)"))
    with pytest.raises(ModuleFileError, match=r"output 0 of forward has dtype int8; .* float32, float16, int32, "
                                              r"uint32, int64, uint8 only \(convert it in the module with \.int\(\)"):
        derive(f)
    g = tmp_path / "mask.py"                  # a bool output travels as uint8 0/1, compared exactly
    g.write_text(_PERMUTE.replace("return x[:, self.perm]", "return x > 0"))
    out = derive(g).of_role("output")[0]
    assert out.dtype == "uint8" and out.bool_tensor


def test_export_speaks_int64(tasks, tmp_path):
    """The ModelNew module allocates an int64 output, refuses a CPU tensor by its dtype, and its fake (meta)
    implementation gives torch.compile an int64 result; the generated test compares integers exactly."""
    from cuda_llm.tasks.torch_export import export_files

    task = load_task_folder(tasks["argmax_rows"]).task
    ex = export_files(task, arch="sm_90", command="nvcc", origin="test")
    mod_text, test_text = ex.files["argmax_rows_ext.py"], ex.files["argmax_rows_test.py"]
    compile(test_text, "argmax_rows_test.py", "exec")
    assert "_OUT_DTYPES = [torch.int64]" in mod_text and '"int64": ctypes.c_int64' in mod_text
    assert "if not w.is_floating_point():" in test_text and "atol=0, rtol=0" in test_text
    shutil.copy(Path(task.folder) / "module.py", tmp_path / "reference_module.py")
    for name, text in ex.files.items():
        (tmp_path / name).write_text(text)
    mod = _load(tmp_path / "argmax_rows_ext.py", "argmax_rows_ext")
    x = torch.randn(6, 10)
    new = mod.ModelNew()
    assert new._output_shapes([x]) == [(6,)]
    fake = mod.kernel_op(x.to("meta"), [6])
    assert fake.dtype == torch.int64 and tuple(fake.shape) == (6,)
    with pytest.raises(ValueError, match="the kernel takes a contiguous CUDA float32 tensor"):
        new(x)

    emb = load_task_folder(tasks["embedding_bag"]).task
    ex = export_files(emb, arch="sm_90", command="nvcc", origin="test")
    out = tmp_path / "emb"
    out.mkdir()
    shutil.copy(Path(emb.folder) / "module.py", out / "reference_module.py")
    for name, text in ex.files.items():
        (out / name).write_text(text)
    mod = _load(out / "embedding_bag_ext.py", "embedding_bag_ext")
    new = mod.ModelNew(50, 4)
    with pytest.raises(ValueError, match="indices: the kernel takes a contiguous CUDA int64 tensor of shape"):
        new(torch.randint(0, 50, (3, 2)))


@pytest.mark.parametrize("module, kernel", [("embedding_bag", "embedding_bag.cu"), ("argmax_rows", "argmax_rows.cu"),
                                            ("argmax_rows", "argmax_rows_int32_wrong.cu")])
def test_the_samples_int64_kernels_pass_the_static_checks_and_compile(tasks, module, kernel, nvcc_path, monkeypatch,
                                                                     tmp_path):
    """The CUDA kernels tests/test_torch_gpu.py judges, up to where a device is needed: the entry point with
    long long pointers is the one derived, and nvcc builds them."""
    import cuda_llm.tools.harness.device_info as device_info
    import cuda_llm.tools.harness.evaluate as evaluate
    from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate

    monkeypatch.setattr(evaluate, "has_cuda_device", lambda: False)
    monkeypatch.setattr(device_info, "has_cuda_device", lambda: False)
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    loaded = load_task_folder(tasks[module])
    src = (ROOT / "examples" / "torch" / "kernels" / kernel).read_text()
    res = evaluate_candidate(loaded, src, candidate=kernel, options=EvalOptions(arch="sm_90"))
    assert res.status == Status.no_device, res.message
    assert res.compile is not None and res.compile.ok and not res.static_issues
    wrong = src.replace("long long* out", "int* out").replace("const long long* indices", "const int* indices")
    res = evaluate_candidate(loaded, wrong, candidate=kernel, options=EvalOptions(arch="sm_90"))
    assert res.status == Status.static_error and "long long*" in res.message


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------------------------ the judge, end to end
@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path_factory.getbasetemp() / "int64-cache"))


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The two modules at sizes a NumPy "kernel" runs in well under a millisecond (the judge's clock check
    compares the worker's times with the parent's; a slow CPU kernel blurs that comparison)."""
    src, out = tmp_path_factory.mktemp("small-src"), tmp_path_factory.mktemp("small")
    found = {}
    for name, sizes in (("argmax_rows", {"rows": 2048, "cols": 256}),
                        ("embedding_bag", {"batch_size": 512, "bag_size": 8, "num_embeddings": 3000,
                                           "embedding_dim": 64})):
        text = (SAMPLE / f"{name}.py").read_text()
        for k, v in sizes.items():
            text = re.sub(rf"^{k} = \d+$", f"{k} = {v}", text, flags=re.M)
        (src / f"{name}.py").write_text(text)
        found[name] = import_file(src / f"{name}.py", out)[0]
    return found


def _judge(folder: Path, kernel: str, tmp_path: Path):
    from cuda_llm.tools.harness.evaluate import EvalOptions, run_compiled
    from cuda_llm.tools.harness.timing_budget import TimingBudget

    loaded = load_task_folder(folder)
    src = HERE / "numpy_kernels" / f"{kernel}.py"
    opts = EvalOptions(budget=TimingBudget(time_budget_s=2.0, min_reps=6, max_reps=24, min_time_s=0.0), timeout_s=120.0, seed=3)
    res = run_compiled(loaded, str(src), source=src.read_text(), options=opts, work_dir=tmp_path / "work",
                       candidate=kernel, worker_argv=WORKER)
    print(f"{kernel}: {res.status.value}: {res.message}")
    return res


@pytest.mark.parametrize("module, kernel, status", [
    ("argmax_rows", "argmax_rows_ok", Status.ok),
    ("embedding_bag", "embedding_bag_ok", Status.ok),
    ("argmax_rows", "argmax_rows_int32", Status.wrong_answer),
])
def test_the_judge_on_int64_tasks(small, tmp_path, module, kernel, status):
    """The real worker loop on the NumPy test device: int64 inputs uploaded, int64 outputs poisoned with the
    64-bit sentinel and handed back, the benchmark's varied input sets (indices from other drawn sets stay
    valid), and the exact check."""
    res = _judge(small[module], kernel, tmp_path)
    if status == Status.ok:
        # ok, or suspect when the clock check (the NumPy device's times against the parent's clock, noisy on
        # a busy CPU and not what this test is about) disagrees: the verdict on the values is what counts
        assert res.status.passed, res.message
        assert res.validation.passed and res.revalidation is not None and res.revalidation.passed
        assert res.timing is not None and res.timing.repetitions >= 6
    else:
        assert res.status == status, res.message
        bad = res.validation.first_failure()
        assert bad.kind == "unwritten" and "1024 of 2048 elements never written" in bad.reason
