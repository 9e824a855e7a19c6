"""The first eight suite tasks: gelu, softmax, layernorm, sgemm, transpose, reduce_sum, prefix_sum, histogram.

CPU: each task loads with its pinned signature; bytes count every buffer once; the NumPy reference agrees
with a direct Python-loop computation on small inputs; tolerances pass output rounding and refuse real
errors (TF32 sgemm, a lost block of a sum, one wrong count). Shapes, benchmark size and finite references
of every task: test_suite_rules.py; compiling every baseline: test_suite_builds.py.
GPU: each naive baseline's timing at the benchmark shape is not flagged as faster than the speed of light
(that every baseline passes every shape: test_harness_gpu.py).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from cuda_llm.tools.harness.judge import validation_cases

from cuda_llm.tasks import load_all, load_task
from cuda_llm.tasks.formulas import evaluate
from cuda_llm.tasks.inputs import dims, make_case_inputs, reference_outputs
from cuda_llm.tasks.loader import SUITE_DIR
from suite_checks import assert_reference_matches_loop, buffer_bytes

SIGNATURES = {
    "gelu": "const float* x, float* y, int n",
    "softmax": "const float* x, float* y, int rows, int cols",
    "layernorm": "const float* x, const float* gamma, const float* beta, float* y, int rows, int cols",
    "sgemm": "const float* A, const float* B, float* C, int M, int N, int K",
    "transpose": "const float* in, float* out, int rows, int cols",
    "reduce_sum": "const float* x, float* out, int n",
    "prefix_sum": "const int* x, int* y, int n",
    "histogram": "const int* x, int* hist, int n, int bins",
}
FIRST8 = sorted(SIGNATURES)

# What "fills an H100" means for the benchmark shape: ~0.1 ms of DRAM traffic or of fp32 math at least.


def _tol(task, output, sizes) -> tuple[float, float]:
    tol = task.tolerance_for(output)
    return float(evaluate(tol.atol, sizes)), float(evaluate(tol.rtol, sizes))


def _within(task, output, got, ref, sizes) -> bool:
    atol, rtol = _tol(task, output, sizes)
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return bool(np.all(np.abs(got - ref) <= atol + rtol * np.abs(ref)))


# ----------------------------------------------------------------------------- loading and shapes
@pytest.mark.parametrize("name", FIRST8)
def test_task_loads_with_its_pinned_signature(name):
    task = load_task(name).task
    assert task.signature == f'extern "C" void solve({SIGNATURES[name]})'
    assert task.folder == SUITE_DIR / name
    assert task.baseline_path.is_file()
    assert task.description.strip() and task.family


@pytest.mark.parametrize("name", FIRST8)
def test_bytes_formula_counts_every_buffer_once(name):
    """bytes is the least traffic: each input read once, each output written once."""
    task = load_task(name).task
    for sizes in task.shapes + task.held_out + [task.benchmark]:
        assert task.bytes_at(sizes) == sum(buffer_bytes(task, sizes).values()), sizes
        assert task.flops_at(sizes) >= 0


def test_task_specifics():
    sg = load_task("sgemm").task
    assert sg.bound == "compute" and sg.family == "matmul"
    assert "cublas" in sg.library_links, "the cuBLAS yardstick must be linked against cuBLAS"
    assert sg.flops_at(sg.benchmark) == 2 * 4096**3
    for name in ("reduce_sum", "prefix_sum", "histogram"):
        assert load_task(name).task.library_links == [], f"{name}: CUB is header-only"
    tr = load_task("transpose").task
    assert dims(tr.outputs[0], {"rows": 3, "cols": 5}) == (5, 3)
    assert tr.benchmark["rows"] != tr.benchmark["cols"], "a square benchmark hides swapped dimensions"
    rs = load_task("reduce_sum").task
    assert dims(rs.outputs[0], rs.benchmark) == (1,)
    # the sum's tolerance grows with n
    assert _tol(rs, rs.outputs[0], {"n": 2**28})[0] > 100 * _tol(rs, rs.outputs[0], {"n": 1000})[0]
    ps = load_task("prefix_sum")
    g = ps.task.inputs[0].generator
    n = ps.task.benchmark["n"]
    assert max(abs(int(g.low)), abs(int(g.high) - 1)) * n < 2**31, "no partial sum can overflow int32"
    hist = load_task("histogram").task
    assert any(s["bins"] > s["n"] for s in hist.shapes), "a shape with more bins than values (empty bins)"


# ------------------------------------------------------------------- independent loop computations
def _loop_gelu(i, s):
    c = math.sqrt(2.0 / math.pi)
    return {"y": [0.5 * v * (1.0 + math.tanh(c * (v + 0.044715 * v ** 3))) for v in i["x"].tolist()]}


def _loop_softmax(i, s):
    out = []
    for row in i["x"].tolist():
        m = max(row)
        e = [math.exp(v - m) for v in row]
        total = sum(e)
        out.append([v / total for v in e])
    return {"y": out}


def _loop_layernorm(i, s):
    gamma, beta = i["gamma"].tolist(), i["beta"].tolist()
    out = []
    for row in i["x"].tolist():
        mean = sum(row) / len(row)
        var = sum((v - mean) ** 2 for v in row) / len(row)
        inv = 1.0 / math.sqrt(var + 1e-5)
        out.append([(v - mean) * inv * g + b for v, g, b in zip(row, gamma, beta)])
    return {"y": out}


def _loop_sgemm(i, s):
    a, b = i["A"].tolist(), i["B"].tolist()
    return {"C": [[sum(a[r][k] * b[k][c] for k in range(s["K"])) for c in range(s["N"])] for r in range(s["M"])]}


def _loop_transpose(i, s):
    a = i["in"].tolist()
    return {"out": [[a[r][c] for r in range(s["rows"])] for c in range(s["cols"])]}


def _loop_reduce_sum(i, s):
    total = 0.0
    for v in i["x"].tolist():
        total += v
    return {"out": [total]}


def _loop_prefix_sum(i, s):
    acc, out = 0, []
    for v in i["x"].tolist():
        acc += v
        out.append(acc)
    return {"y": out}


def _loop_histogram(i, s):
    hist = [0] * s["bins"]
    for v in i["x"].tolist():
        hist[v] += 1
    return {"hist": hist}


LOOP_CASES = {
    "gelu": (_loop_gelu, [{"n": 1}, {"n": 77}]),
    "softmax": (_loop_softmax, [{"rows": 4, "cols": 9}, {"rows": 1, "cols": 1}]),
    "layernorm": (_loop_layernorm, [{"rows": 5, "cols": 17}, {"rows": 1, "cols": 1}, {"rows": 2, "cols": 2}]),
    "sgemm": (_loop_sgemm, [{"M": 5, "N": 7, "K": 9}, {"M": 1, "N": 3, "K": 1}]),
    "transpose": (_loop_transpose, [{"rows": 3, "cols": 5}, {"rows": 1, "cols": 4}, {"rows": 6, "cols": 1}]),
    "reduce_sum": (_loop_reduce_sum, [{"n": 1}, {"n": 1001}]),
    "prefix_sum": (_loop_prefix_sum, [{"n": 1}, {"n": 1001}]),
    "histogram": (_loop_histogram, [{"n": 1, "bins": 1}, {"n": 500, "bins": 13}, {"n": 3, "bins": 50}]),
}


@pytest.mark.parametrize("name", FIRST8)
def test_reference_agrees_with_a_direct_loop(name):
    loop, cases = LOOP_CASES[name]
    assert_reference_matches_loop(name, loop, cases)


def test_generated_inputs_have_the_promised_properties():
    rng = np.random.default_rng(2)
    hist = load_task("histogram")
    x = make_case_inputs(hist, {"n": 65537, "bins": 1000}, rng)["x"]
    assert x.dtype == np.int32 and x.min() >= 0 and x.max() < 1000
    scan = load_task("prefix_sum")
    x = make_case_inputs(scan, {"n": 65537}, rng)["x"]
    assert x.dtype == np.int32 and (x < 0).any() and (x > 0).any() and np.abs(x).max() <= 9
    ln = load_task("layernorm")
    x = make_case_inputs(ln, {"rows": 64, "cols": 512}, rng)["x"].astype(np.float64)
    means, stds = x.mean(axis=1), x.std(axis=1)
    assert np.ptp(means) > 3 and np.ptp(stds) > 1, "rows differ in offset and spread"


# --------------------------------------------------------------------------------------- tolerances
@pytest.mark.parametrize("name", FIRST8)
def test_tolerance_accepts_output_rounding_and_refuses_a_one_percent_error(name):
    loaded = load_task(name)
    task = loaded.task
    sizes = sorted(task.shapes, key=task.bytes_at)[-2]  # a mid-to-large shape
    inputs = make_case_inputs(loaded, sizes, np.random.default_rng(4))
    refs = reference_outputs(loaded, inputs, sizes)
    for p in task.outputs:
        ref = refs[p.name].astype(np.float64)
        assert _within(task, p, ref.astype(np.dtype(p.dtype.numpy)), ref, sizes), "rounding to the output type"
        if p.dtype.is_float:
            assert not _within(task, p, ref * 1.01 + 1e-3, ref, sizes), "a 1% error fails"
        else:
            wrong = ref.copy()
            wrong.flat[wrong.size // 2] += 1
            assert not _within(task, p, wrong, ref, sizes), "one wrong integer fails"


def _tf32(a: np.ndarray) -> np.ndarray:
    """Round float32 values to TF32 (10 mantissa bits, round to nearest), as tensor cores read them."""
    bits = a.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


@pytest.mark.parametrize("sizes", [{"M": 64, "N": 48, "K": 513}, {"M": 17, "N": 31, "K": 5}])
def test_sgemm_tolerance_passes_fp32_and_refuses_tf32(sizes):
    loaded = load_task("sgemm")
    task = loaded.task
    inp = make_case_inputs(loaded, sizes, np.random.default_rng(7))
    ref = reference_outputs(loaded, inp, sizes)["C"]
    a, b = inp["A"], inp["B"]
    acc = np.zeros((sizes["M"], sizes["N"]), np.float32)
    acc_tf32 = np.zeros_like(acc)
    ta, tb = _tf32(a), _tf32(b)
    for k in range(sizes["K"]):  # summed in the order a simple kernel does, in fp32
        acc += a[:, k:k + 1] * b[k:k + 1, :]
        acc_tf32 += ta[:, k:k + 1] * tb[k:k + 1, :]
    assert _within(task, task.outputs[0], acc, ref, sizes)
    assert not _within(task, task.outputs[0], acc_tf32, ref, sizes)


def test_reduce_sum_tolerance_passes_fp32_orders_and_refuses_a_lost_block():
    loaded = load_task("reduce_sum")
    task = loaded.task
    sizes = {"n": 4194304}
    x = make_case_inputs(loaded, sizes, np.random.default_rng(5))["x"]
    ref = reference_outputs(loaded, {"x": x}, sizes)["out"]
    out = task.outputs[0]
    sequential = np.cumsum(x, dtype=np.float32)[-1:]  # one thread adding every term in a row
    blocks = x.reshape(-1, 256)
    while blocks.shape[1] > 1:  # shared-memory trees of 256, then one atomicAdd per block in order
        half = blocks.shape[1] // 2
        blocks = blocks[:, :half] + blocks[:, half:]
    atomics = np.cumsum(blocks[:, 0], dtype=np.float32)[-1:]
    assert _within(task, out, sequential, ref, sizes)
    assert _within(task, out, atomics, ref, sizes)
    lost = ref - x[-256:].astype(np.float64).sum()
    assert abs(lost - ref)[0] > 1.0, "the test's lost block must matter"
    assert not _within(task, out, lost, ref, sizes)


def test_layernorm_tolerance_refuses_a_missing_mean_and_a_missing_eps():
    loaded = load_task("layernorm")
    task = loaded.task
    sizes = {"rows": 37, "cols": 1000}
    inp = make_case_inputs(loaded, sizes, np.random.default_rng(6))
    ref = reference_outputs(loaded, inp, sizes)["y"]
    x = inp["x"].astype(np.float64)
    g, b = inp["gamma"].astype(np.float64), inp["beta"].astype(np.float64)
    mean, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    assert _within(task, task.outputs[0], ((x - mean) / np.sqrt(var + 1e-5) * g + b).astype(np.float32), ref, sizes)
    no_mean = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5) * g + b
    assert not _within(task, task.outputs[0], no_mean, ref, sizes)
    single = {"rows": 1, "cols": 1}  # variance 0: eps alone keeps the output finite (it is beta)
    one = make_case_inputs(loaded, single, np.random.default_rng(0))
    ref_one = reference_outputs(loaded, one, single)["y"]
    np.testing.assert_allclose(ref_one[0], one["beta"], rtol=0, atol=1e-12)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = one["x"].astype(np.float64) - one["x"].astype(np.float64)
        no_eps = d / np.sqrt(d * d) * one["gamma"] + one["beta"]
    assert not _within(task, task.outputs[0], no_eps, ref_one, single)

# -------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("name", FIRST8)
def test_naive_baseline_timing_is_not_suspect(name):
    """At the benchmark shape the naive kernel is slower than the speed-of-light bound of its bytes and
    flops formulas; a `suspect` here means a formula over-counts."""
    from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate
    from cuda_llm.tools.harness.timing_budget import TimingBudget
    from cuda_llm.results import Status

    loaded = load_task(name)
    result = evaluate_candidate(loaded, loaded.task.baseline_path.read_text(), candidate="naive",
                                options=EvalOptions(budget=TimingBudget(time_budget_s=3, min_reps=3, max_reps=20)))
    assert result.status is Status.ok, f"{name}: {result.status.value}: {result.message}"
    assert result.timing is not None
    assert result.validation is not None and result.validation.n_passed == len(validation_cases(loaded, True))


# ------------------------------------------------------------------------------------ docs/tasks.md
DOCS = Path(__file__).resolve().parents[1] / "docs" / "tasks.md"


def test_docs_table_lists_every_builtin_task_with_its_signature_and_benchmark():
    text = DOCS.read_text()
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    for loaded in load_all():
        task = loaded.task
        if task.folder is None or task.folder.parent != SUITE_DIR:
            continue
        assert task.name in rows, f"docs/tasks.md: no row for {task.name}"
        row = rows[task.name]
        params = task.signature.split("(", 1)[1].rstrip(")")
        assert f"`{params}`" in row, f"docs/tasks.md: {task.name} signature differs from task.toml"
        bench = ", ".join(f"{k}={v}" for k, v in task.benchmark.items())
        assert bench in row and task.domain in row and task.bound in row, f"docs/tasks.md: {task.name} row"


def test_docs_example_task_loads(tmp_path):
    text = DOCS.read_text()
    toml = re.search(r"```toml\n(.*?)```", text, re.S)
    assert toml, "docs/tasks.md has a task.toml example"
    folder = tmp_path / "saxpy"
    folder.mkdir()
    (folder / "task.toml").write_text(toml.group(1))
    (folder / "reference.py").write_text(
        "import numpy as np\n\ndef reference(inputs, sizes):\n"
        "    return {'y': 2.5 * inputs['x'].astype(np.float64) + inputs['z']}\n")
    (folder / "naive.cu").write_text("// not compiled here\n")
    loaded = load_task(folder)
    assert loaded.task.signature == 'extern "C" void solve(const float* x, const float* z, float* y, int n)'
    inputs = make_case_inputs(loaded, {"n": 5}, np.random.default_rng(0))
    out = reference_outputs(loaded, inputs, {"n": 5})["y"]
    np.testing.assert_allclose(out, 2.5 * inputs["x"] + inputs["z"], rtol=1e-6)
