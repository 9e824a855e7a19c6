"""The twelve suite tasks beyond the first eight, and every library yardstick.

CPU: each task loads with its pinned signature; its NumPy reference agrees with a direct Python-loop
computation on small inputs; generated inputs have the properties the task promises (skewed CSR rows,
near-tie-free k-means points, duplicate sort keys); the hgemm tolerance tells fp32 accumulation from fp16
accumulation. Shapes, benchmark size and finite references of every task: test_suite_rules.py;
compiling every baseline: test_suite_builds.py. GPU: every library baseline passes its task on all shapes through the evaluation
harness (the naive ones: test_harness_gpu.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from cuda_llm.tools.harness.judge import validation_cases

from cuda_llm.tasks import load_task
from cuda_llm.tasks.formulas import evaluate
from cuda_llm.tasks.inputs import dims, make_case_inputs, reference_outputs
from cuda_llm.tasks.loader import SUITE_DIR
from cuda_llm.tools.harness.validate import within
from suite_checks import LIBRARY_TASKS, assert_reference_matches_loop, buffer_bytes, cublas_installed

SIGNATURES = {
    "rmsnorm": "const float* x, const float* w, float* y, int rows, int cols",
    "hgemm": "const __half* A, const __half* B, float* C, int M, int N, int K",
    "conv2d": "const float* x, const float* w, float* y, int N, int C, int H, int W, int K",
    "maxpool2d": "const float* x, float* y, int N, int C, int H, int W",
    "attention": "const float* Q, const float* K, const float* V, float* O, int S",
    "cross_entropy": "const float* logits, const int* labels, float* loss, int N, int C",
    "gemv": "const float* A, const float* x, float* y, int M, int N",
    "spmv_csr": "const int* row_ptr, const int* col_idx, const float* vals, const float* x, float* y, "
                "int M, int N, int nnz",
    "stencil2d": "const float* inp, float* out, int H, int W",
    "nbody": "const float* body, float* acc, int n",
    "sort_u32": "const unsigned int* keys_in, unsigned int* keys_out, int n",
    "kmeans_assign": "const float* points, const float* centroids, int* labels, int n, int k, int d",
}
TWELVE = sorted(SIGNATURES)


# ----------------------------------------------------------------------------- loading and shapes
@pytest.mark.parametrize("name", TWELVE)
def test_task_loads_with_its_pinned_signature(name):
    task = load_task(name).task
    assert task.signature == f'extern "C" void solve({SIGNATURES[name]})'
    assert task.folder == SUITE_DIR / name
    assert task.baseline_path.is_file()


@pytest.mark.parametrize("name", TWELVE)
def test_bytes_formula_counts_every_buffer_once(name):
    """bytes is the least traffic: each input read once, each output written once (maxpool skips the odd
    last row and column, which it never needs to read)."""
    task = load_task(name).task
    for sizes in task.shapes + task.held_out + [task.benchmark]:
        buffers = buffer_bytes(task, sizes)
        if name == "maxpool2d":
            out = buffers["y"]
            assert task.bytes_at(sizes) == 5 * out <= sum(buffers.values())
        else:
            assert task.bytes_at(sizes) == sum(buffers.values()), sizes
        assert task.flops_at(sizes) >= 0


def test_specific_shape_requirements():
    att = load_task("attention").task
    assert all(dims(p, {"S": 7})[1] == 64 for p in att.params if p.kind == "pointer")
    assert max(s["S"] for s in att.shapes) >= 1024 and max(s["S"] for s in att.held_out) >= 1024
    assert att.benchmark["S"] >= 8192
    hg = load_task("hgemm").task
    assert [p.dtype.value for p in hg.params[:3]] == ["float16", "float16", "float32"]
    assert "cuda_fp16.h" in hg.includes
    ce = load_task("cross_entropy").task
    assert dims(ce.outputs[0], ce.benchmark) == (1,)


# ------------------------------------------------------------------- independent loop computations
def _loop_rmsnorm(i, s):
    x, w = i["x"].tolist(), i["w"].tolist()
    out = []
    for row in x:
        scale = 1.0 / math.sqrt(sum(v * v for v in row) / len(row) + 1e-6)
        out.append([v * scale * wc for v, wc in zip(row, w)])
    return {"y": out}


def _loop_hgemm(i, s):
    a, b = i["A"].astype(float).tolist(), i["B"].astype(float).tolist()
    return {"C": [[sum(a[r][k] * b[k][c] for k in range(s["K"])) for c in range(s["N"])] for r in range(s["M"])]}


def _loop_conv2d(i, s):
    x, w = i["x"].tolist(), i["w"].tolist()
    n_, c_, h_, w_, k_ = s["N"], s["C"], s["H"], s["W"], s["K"]
    y = [[[[0.0] * w_ for _ in range(h_)] for _ in range(k_)] for _ in range(n_)]
    for n in range(n_):
        for k in range(k_):
            for r in range(h_):
                for c in range(w_):
                    acc = 0.0
                    for ch in range(c_):
                        for di in range(3):
                            for dj in range(3):
                                rr, cc = r + di - 1, c + dj - 1
                                if 0 <= rr < h_ and 0 <= cc < w_:
                                    acc += w[k][ch][di][dj] * x[n][ch][rr][cc]
                    y[n][k][r][c] = acc
    return {"y": y}


def _loop_maxpool2d(i, s):
    x = i["x"].tolist()
    return {"y": [[[[max(x[n][c][2 * r][2 * q], x[n][c][2 * r][2 * q + 1],
                         x[n][c][2 * r + 1][2 * q], x[n][c][2 * r + 1][2 * q + 1])
                     for q in range(s["W"] // 2)] for r in range(s["H"] // 2)]
                   for c in range(s["C"])] for n in range(s["N"])]}


def _loop_attention(i, s):
    q, k, v = i["Q"].tolist(), i["K"].tolist(), i["V"].tolist()
    out = []
    for qi in q:
        scores = [sum(a * b for a, b in zip(qi, kj)) / 8.0 for kj in k]
        m = max(scores)
        p = [math.exp(x - m) for x in scores]
        total = sum(p)
        out.append([sum(p[j] * v[j][d] for j in range(len(k))) / total for d in range(64)])
    return {"O": out}


def _loop_cross_entropy(i, s):
    logits, labels = i["logits"].tolist(), i["labels"].tolist()
    losses = [math.log(sum(math.exp(v) for v in row)) - row[lab] for row, lab in zip(logits, labels)]
    return {"loss": [sum(losses) / len(losses)]}


def _loop_gemv(i, s):
    a, x = i["A"].tolist(), i["x"].tolist()
    return {"y": [sum(aij * xj for aij, xj in zip(row, x)) for row in a]}


def _loop_spmv_csr(i, s):
    rp, ci, va, x = (i[k].tolist() for k in ("row_ptr", "col_idx", "vals", "x"))
    return {"y": [sum(va[k] * x[ci[k]] for k in range(rp[r], rp[r + 1])) for r in range(s["M"])]}


def _loop_stencil2d(i, s):
    a = i["inp"].tolist()
    h, w = s["H"], s["W"]
    out = [row[:] for row in a]
    for r in range(1, h - 1):
        for c in range(1, w - 1):
            out[r][c] = 0.25 * (a[r - 1][c] + a[r + 1][c] + a[r][c - 1] + a[r][c + 1])
    return {"out": out}


def _loop_nbody(i, s):
    b = i["body"].tolist()
    acc = []
    for xi, yi, zi, _ in b:
        ax = ay = az = 0.0
        for xj, yj, zj, mj in b:
            dx, dy, dz = xj - xi, yj - yi, zj - zi
            f = mj / (dx * dx + dy * dy + dz * dz + 0.01) ** 1.5
            ax, ay, az = ax + f * dx, ay + f * dy, az + f * dz
        acc.append([ax, ay, az])
    return {"acc": acc}


def _loop_sort_u32(i, s):
    return {"keys_out": sorted(i["keys_in"].tolist())}


def _loop_kmeans_assign(i, s):
    p, c = i["points"].tolist(), i["centroids"].tolist()
    labels = []
    for pi in p:
        d = [sum((a - b) ** 2 for a, b in zip(pi, cj)) for cj in c]
        labels.append(d.index(min(d)))  # the first minimum: ties go to the lowest index
    return {"labels": labels}


LOOP_CASES = {
    "rmsnorm": (_loop_rmsnorm, [{"rows": 3, "cols": 17}, {"rows": 1, "cols": 1}]),
    "hgemm": (_loop_hgemm, [{"M": 5, "N": 7, "K": 9}, {"M": 1, "N": 3, "K": 1}]),
    "conv2d": (_loop_conv2d, [{"N": 2, "C": 3, "H": 5, "W": 4, "K": 2}, {"N": 1, "C": 1, "H": 1, "W": 1, "K": 1}]),
    "maxpool2d": (_loop_maxpool2d, [{"N": 1, "C": 2, "H": 5, "W": 7}, {"N": 2, "C": 1, "H": 2, "W": 2}]),
    "attention": (_loop_attention, [{"S": 9}, {"S": 1}]),
    "cross_entropy": (_loop_cross_entropy, [{"N": 7, "C": 5}, {"N": 1, "C": 1}, {"N": 300, "C": 3}]),
    "gemv": (_loop_gemv, [{"M": 6, "N": 11}, {"M": 1, "N": 1}]),
    "spmv_csr": (_loop_spmv_csr, [{"M": 40, "N": 33, "nnz": 100, "max_row": 33},
                                  {"M": 5, "N": 9, "nnz": 3, "max_row": 9}]),
    "stencil2d": (_loop_stencil2d, [{"H": 6, "W": 5}, {"H": 2, "W": 5}, {"H": 1030, "W": 4}]),  # slab seams
    "nbody": (_loop_nbody, [{"n": 13}, {"n": 1}, {"n": 1030}]),  # crosses a 1024-body block
    "sort_u32": (_loop_sort_u32, [{"n": 1000}, {"n": 1}]),
    "kmeans_assign": (_loop_kmeans_assign, [{"n": 50, "k": 7, "d": 3}, {"n": 4, "k": 1, "d": 2}]),
}


@pytest.mark.parametrize("name", TWELVE)
def test_reference_agrees_with_a_direct_loop(name):
    loop, cases = LOOP_CASES[name]
    assert_reference_matches_loop(name, loop, cases)


@pytest.mark.parametrize("name", TWELVE)
def test_tolerance_accepts_fp32_rounding_and_refuses_a_one_percent_error(name):
    loaded = load_task(name)
    task = loaded.task
    sizes = sorted(task.shapes, key=task.bytes_at)[-2]  # a mid-to-large shape
    inputs = make_case_inputs(loaded, sizes, np.random.default_rng(4))
    for p in task.outputs:
        ref = reference_outputs(loaded, inputs, sizes)[p.name].astype(np.float64)
        tol = task.tolerance_for(p)
        atol, rtol = evaluate(tol.atol, sizes), evaluate(tol.rtol, sizes)

        def ok(out, ref=ref, atol=atol, rtol=rtol):
            return bool(np.all(within(np.abs(out - ref), np.abs(ref), atol, rtol)))     # the judge's rule

        assert ok(ref.astype(np.dtype(p.dtype.numpy)).astype(np.float64)), "rounding to the output type passes"
        if p.dtype.is_float:
            assert not ok(ref * 1.01 + 1e-3), "a 1% error fails"
        else:
            wrong = ref.copy()
            wrong.flat[wrong.size // 2] += 1
            assert not ok(wrong), "one wrong integer fails"


def test_nbody_reference_tiles_join_up(monkeypatch):
    """The reference works on tiles of bodies; with tiny tiles every seam is crossed on a small n."""
    loaded = load_task("nbody")
    monkeypatch.setitem(loaded.reference.__globals__, "_ROWS", 4)
    monkeypatch.setitem(loaded.reference.__globals__, "_COLS", 5)
    sizes = {"n": 23}
    inputs = make_case_inputs(loaded, sizes, np.random.default_rng(8))
    got = reference_outputs(loaded, inputs, sizes)["acc"]
    np.testing.assert_allclose(got, np.asarray(_loop_nbody(inputs, sizes)["acc"]), rtol=1e-9, atol=1e-9)


# ------------------------------------------------------------------------- generated input properties
def test_spmv_rows_are_valid_csr_with_a_power_law_skew():
    loaded = load_task("spmv_csr")
    sizes = {"M": 30000, "N": 20000, "nnz": 500000, "max_row": 4096}
    inp = make_case_inputs(loaded, sizes, np.random.default_rng(3))
    rp, cols = inp["row_ptr"].astype(np.int64), inp["col_idx"].astype(np.int64)
    lengths = np.diff(rp)
    assert rp[0] == 0 and rp[-1] == sizes["nnz"] and (lengths >= 0).all()
    assert lengths.max() <= sizes["max_row"] and cols.min() >= 0 and cols.max() < sizes["N"]
    rows = np.repeat(np.arange(sizes["M"]), lengths)
    same_row = rows[1:] == rows[:-1]
    assert (np.diff(cols)[same_row] > 0).all(), "columns sorted and distinct within each row"
    mean = sizes["nnz"] / sizes["M"]
    assert (lengths == 0).sum() > 0, "some rows are empty"
    assert np.median(lengths) < mean, "most rows are shorter than the mean"
    assert lengths.max() > 20 * mean, "a few rows are very long"


def test_spmv_refuses_sizes_that_cannot_hold_nnz():
    loaded = load_task("spmv_csr")
    with pytest.raises(ValueError, match="does not fit"):
        make_case_inputs(loaded, {"M": 2, "N": 3, "nnz": 7, "max_row": 3}, np.random.default_rng(0))


def test_kmeans_inputs_have_no_near_ties_in_fp32():
    """Both usual fp32 evaluation orders give the reference's labels on the generated points."""
    loaded = load_task("kmeans_assign")
    sizes = {"n": 3000, "k": 64, "d": 33}
    inp = make_case_inputs(loaded, sizes, np.random.default_rng(5))
    labels = reference_outputs(loaded, inp, sizes)["labels"]
    p, c = inp["points"], inp["centroids"]
    direct = ((p[:, None, :] - c[None, :, :]) ** 2).sum(axis=2, dtype=np.float32)
    expanded = (p * p).sum(axis=1)[:, None] - np.float32(2) * (p @ c.T) + (c * c).sum(axis=1)[None, :]
    assert direct.dtype == expanded.dtype == np.float32
    np.testing.assert_array_equal(direct.argmin(axis=1), labels)
    np.testing.assert_array_equal(expanded.argmin(axis=1), labels)


def test_sort_keys_have_duplicates_and_both_extremes():
    loaded = load_task("sort_u32")
    keys = make_case_inputs(loaded, {"n": 65537}, np.random.default_rng(2))["keys_in"]
    assert keys.dtype == np.uint32
    assert 0 in keys and 2**32 - 1 in keys and (keys >= 2**31).any()
    assert np.unique(keys).size < keys.size * 0.9


def _within(task_name, out, ref, sizes):
    task = load_task(task_name).task
    tol = task.tolerance_for(task.outputs[0])
    atol, rtol = evaluate(tol.atol, sizes), evaluate(tol.rtol, sizes)
    return bool(np.all(np.abs(out - ref) <= atol + rtol * np.abs(ref)))


def test_hgemm_tolerance_passes_fp32_accumulation_and_refuses_fp16_accumulation():
    loaded = load_task("hgemm")
    sizes = {"M": 64, "N": 48, "K": 2000}
    inp = make_case_inputs(loaded, sizes, np.random.default_rng(7))
    ref = reference_outputs(loaded, inp, sizes)["C"]
    a, b = inp["A"], inp["B"]
    acc32 = np.zeros((64, 48), np.float32)
    acc16 = np.zeros((64, 48), np.float16)
    for k in range(sizes["K"]):  # products of fp16 values, summed in the order a simple kernel does
        prod = a[:, k:k + 1].astype(np.float32) * b[k:k + 1, :].astype(np.float32)
        acc32 += prod
        acc16 = (acc16.astype(np.float32) + prod).astype(np.float16)
    assert _within("hgemm", acc32, ref, sizes)
    assert not _within("hgemm", acc16.astype(np.float32), ref, sizes)


def test_attention_tolerance_refuses_an_unnormalised_softmax():
    loaded = load_task("attention")
    sizes = {"S": 64}
    inp = make_case_inputs(loaded, sizes, np.random.default_rng(9))
    ref = reference_outputs(loaded, inp, sizes)["O"]
    s = inp["Q"].astype(np.float32) @ inp["K"].T.astype(np.float32) / np.float32(8)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    good = (p / p.sum(axis=1, keepdims=True)) @ inp["V"]
    assert _within("attention", good.astype(np.float32), ref, sizes)
    assert not _within("attention", (p @ inp["V"]).astype(np.float32) / 64, ref, sizes)


# -------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(LIBRARY_TASKS))
def test_library_baseline_passes_every_shape_on_the_gpu(name):
    from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate

    loaded = load_task(name)
    assert loaded.task.library_path is not None
    if "cublas" in loaded.task.library_links and not cublas_installed():
        pytest.fail("cuBLAS not installed: neither the CUDA toolkit's nor the pip package nvidia-cublas")
    result = evaluate_candidate(loaded, loaded.task.library_path.read_text(), candidate="library",
                                options=EvalOptions(allow_libraries=True, timing=False))
    _assert_passed(loaded, result)


def _assert_passed(loaded, result):
    assert result.status.passed, f"{loaded.name}: {result.status.value}: {result.message}"
    assert result.validation is not None and result.validation.passed
    cases = result.validation.cases
    assert len(cases) == len(validation_cases(loaded, True))
    assert all(c.passed for c in cases), [c.model_dump() for c in cases if not c.passed]
    assert any(c.held_out for c in cases)
