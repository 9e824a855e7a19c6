"""The evaluation harness without a GPU: validation rules, timing statistics, the speed-of-light bound,
the worker protocol, the worker runner, and evaluate_candidate and `cuda-llm eval` up to the point where a
device is needed (real nvcc for sm_90)."""

from __future__ import annotations

import json
import math
import os
import sys
import time

import numpy as np
import pytest

from cuda_llm.tasks import load_task
from pydantic import ValidationError

from cuda_llm.tools.bounds import speed_of_light
from cuda_llm.tools.harness import timing_stats, validate
from cuda_llm.tools.harness.timing_budget import TimingBudget
from cuda_llm.tools.device.device_probe import has_cuda_device
from cuda_llm.results import CaseResult, DeviceInfo, Status, TimingResult, ValidationResult
from cuda_llm.tools.harness.worker_protocol import (DeviceInfoResponse, EvaluateResponse, RunOnceRequest, ServeRequest,
                                            TimeCommand, WorkerError, decode, dump_json, encode)


# ------------------------------------------------------------------------------------------ validate
def test_poison_is_bit_exact_and_recognised_for_every_dtype():
    from cuda_llm.tasks.model import DType

    for dt in [np.dtype(d.numpy) for d in DType]:
        a = validate.poisoned((5,), dt)
        assert a.dtype == dt and validate.is_poison(a).all()
    f = validate.poisoned((1,), np.float32)
    assert np.isnan(f).all()
    assert not validate.is_poison(np.array([np.nan], np.float32)).any()       # NumPy's own NaN differs
    assert not validate.is_poison(np.array([0x7FFFFFFF], np.uint32).view(np.float32)).any()  # the GPU's NaN
    assert validate.poison_word32(np.float32) == validate.FLOAT32_POISON
    assert validate.poison_word32(np.float16) & 0xFFFF == validate.FLOAT16_POISON


def test_a_32_bit_fill_writes_the_poison_of_every_dtype_8_byte_elements_included():
    """The worker poisons with memset_d32 only: repeating poison_word32 over a buffer must give exactly the
    host's poisoned() array, for 2-, 4- and 8-byte elements, odd counts included."""
    from cuda_llm.tasks.model import DType

    for d in DType:
        dt = np.dtype(d.numpy)
        for n in (1, 7, 64):
            words = -(-n * dt.itemsize // 4)                 # as worker_loop.Buffers rounds up
            filled = np.full(words, validate.poison_word32(dt), np.uint32).view(np.uint8)[:n * dt.itemsize]
            assert np.array_equal(filled, validate.poisoned((n,), dt).view(np.uint8)), (d, n)
            assert validate.is_poison(filled.view(dt)).all()
    assert validate.poison_word32(np.int64) == validate.INT_SENTINEL
    assert validate.poison_value(np.int64) == np.int64(-2401053088876216593)
    assert int(validate.poison_value(np.int64)) & 0xFFFFFFFF == validate.INT_SENTINEL


def test_a_poison_that_no_32_bit_fill_can_write_is_refused(monkeypatch):
    monkeypatch.setitem(validate._POISON_BITS, np.dtype(np.int64), 0x0123456789ABCDEF)
    with pytest.raises(ValueError, match="not a repeated 32-bit word"):
        validate.poison_word32(np.int64)
    with pytest.raises(ValueError, match="no poison"):
        validate.poison_word32(np.float64)


def test_int64_outputs_compare_exactly_beyond_float64s_53_bits():
    """Two int64 values float64 cannot tell apart (2^60 and 2^60 + 1) are different answers."""
    e = np.array([2**60, 5, -3], dtype=np.int64)
    g = e.copy()
    assert validate.compare_output("idx", g, e, (0, 0), is_float=False)["passed"]
    assert validate.passes(g, e, (0, 0))
    g[0] += 1
    assert np.float64(g[0]) == np.float64(e[0])                  # what a float64 comparison would see
    r = validate.compare_output("idx", g, e, (0, 0), is_float=False)
    assert not r["passed"] and r["kind"] == "wrong_values" and r["first_bad_index"] == [0]
    assert not validate.passes(g, e, (0, 0))
    g = e.copy()
    g[2] = validate.poison_value(np.int64)
    r = validate.compare_output("idx", g, e, (0, 0), is_float=False)
    assert not r["passed"] and r["kind"] == "unwritten" and "1 of 3 elements never written" in r["reason"]
    # a reference that really holds the sentinel's value: a kernel that wrote it is right
    e2 = np.array([validate.poison_value(np.int64), 1], np.int64)
    assert validate.compare_output("idx", e2.copy(), e2, (0, 0), is_float=False)["passed"]


def test_tolerance_is_atol_plus_rtol_times_expected():
    e = np.array([0.0, 10.0, 100.0])
    inside = e + np.array([0.99e-3, 0.99e-3 + 10 * 1e-3, 0.0])
    r = validate.compare_output("y", inside.astype(np.float64), e, (1e-3, 1e-3), is_float=True)
    assert r["passed"], r["reason"]
    assert r["max_abs_err"] == pytest.approx(0.99e-3 + 10e-3)
    outside = e + np.array([0.0, 0.0, 1.2e-3 + 100 * 1e-3])
    r = validate.compare_output("y", outside, e, (1e-3, 1e-3), is_float=True)
    assert not r["passed"]
    assert r["first_bad_index"] == [2] and r["expected"] == 100.0
    assert "outside tolerance" in r["reason"]


def test_first_bad_index_is_row_major_and_multidimensional():
    e = np.zeros((4, 5))
    g = e.copy()
    g[2, 3] = 1.0
    g[3, 0] = 1.0
    r = validate.compare_output("out", g.astype(np.float32), e, (1e-4, 0.0), is_float=True)
    assert not r["passed"] and r["first_bad_index"] == [2, 3] and r["got"] == 1.0
    assert r["reason"].startswith("out: 2 of 20 elements")


def test_nan_and_inf_never_pass_and_unwritten_elements_are_named():
    e = np.ones(6)
    g = np.ones(6, np.float32)
    g[4] = np.inf
    r = validate.compare_output("y", g, e, (1e9, 1e9), is_float=True)      # huge tolerance: still refused
    assert not r["passed"] and "NaN/Inf" in r["reason"] and r["first_bad_index"] == [4]
    g = np.ones(6, np.float32)
    g[1] = np.nan
    r = validate.compare_output("y", g, e, (1e9, 1e9), is_float=True)
    assert not r["passed"] and "NaN/Inf" in r["reason"]
    g = np.ones(6, np.float32)
    g[3:] = validate.poisoned((3,), np.float32)
    r = validate.compare_output("y", g, e, (1e-4, 1e-4), is_float=True)
    assert not r["passed"] and "3 of 6 elements never written" in r["reason"] and r["first_bad_index"] == [3]


def test_integers_compare_exactly_and_the_sentinel_means_unwritten():
    e = np.arange(10)
    r = validate.compare_output("hist", np.arange(10, dtype=np.int32), e, (0, 0), is_float=False)
    assert r["passed"]
    g = np.arange(10, dtype=np.int32)
    g[7] += 1
    r = validate.compare_output("hist", g, e, (0, 0), is_float=False)
    assert not r["passed"] and r["first_bad_index"] == [7] and r["got"] == 8 and r["expected"] == 7
    g = np.arange(10, dtype=np.int32)
    g[9] = validate.poison_value(np.int32)
    r = validate.compare_output("hist", g, e, (0, 0), is_float=False)
    assert not r["passed"] and "never written" in r["reason"]


def test_wrong_element_count_fails():
    r = validate.compare_output("y", np.zeros(3, np.float32), np.zeros(4), (1, 1), is_float=True)
    assert not r["passed"] and "3 elements, expected 4" in r["reason"]


def test_input_mutation_is_bitwise():
    a = np.array([[1.0, np.nan], [3.0, 4.0]], np.float32)
    assert validate.unchanged(a, a.copy())                   # NaN-safe
    b = a.copy()
    b[1, 0] = -3.0
    assert not validate.unchanged(a, b)
    assert validate.first_difference(a, b) == [1, 0]
    assert validate.first_difference(a, a.copy()) is None


def test_large_outputs_are_checked_block_by_block_with_the_same_verdicts(monkeypatch):
    """A passing output gets the same error maxima from the quick block-wise check as from the full one;
    a failure in a later block is found at its exact index; a mutation in the last block is seen."""
    monkeypatch.setattr(validate, "CHUNK", 1000)
    rng = np.random.default_rng(0)
    e = rng.standard_normal((70, 101))                       # 7070 elements: 8 blocks, the last one partial
    g = (e * (1 + 3e-6)).astype(np.float32)
    quick = validate.compare_output("y", g, e, (1e-5, 1e-4), is_float=True)
    monkeypatch.setattr(validate, "_passes_quickly", lambda *a, **k: None)
    full = validate.compare_output("y", g, e, (1e-5, 1e-4), is_float=True)
    assert quick["passed"] and full["passed"]
    assert quick["max_abs_err"] == pytest.approx(full["max_abs_err"]) and quick["max_rel_err"] == pytest.approx(full["max_rel_err"])
    monkeypatch.undo()
    monkeypatch.setattr(validate, "CHUNK", 1000)
    bad = g.copy()
    bad[69, 100] = 7.0                                       # the very last element
    bad[50, 3] = validate.poisoned((1,), np.float32)[0]      # never written, in block 6
    r = validate.compare_output("y", bad, e, (1e-5, 1e-4), is_float=True)
    assert not r["passed"] and "1 of 7070 elements never written" in r["reason"] and r["first_bad_index"] == [50, 3]
    bad[50, 3] = g[50, 3]
    r = validate.compare_output("y", bad, e, (1e-5, 1e-4), is_float=True)
    assert not r["passed"] and r["first_bad_index"] == [69, 100]
    inf = np.full(3000, np.inf)                              # an Inf the reference has too is not an error
    assert validate.compare_output("y", inf.astype(np.float32), inf, (1e-5, 1e-4), is_float=True)["passed"]
    x = rng.standard_normal(5000).astype(np.float32)
    y = x.copy()
    y[-1] = -y[-1]
    assert validate.unchanged(x, x.copy()) and not validate.unchanged(x, y)
    assert validate.first_difference(x, y) == [4999]


def test_the_bare_verdict_agrees_with_the_full_check(monkeypatch):
    """``passes`` (the replay test's early-exit check) says what ``compare_output`` says, for every rule:
    within tolerance, just outside it in a late block, the reference's own Inf, a NaN, the poison, a
    wrong size, exact integers."""
    monkeypatch.setattr(validate, "CHUNK", 1000)
    rng = np.random.default_rng(1)
    e = rng.standard_normal(7070)
    tol = (1e-5, 1e-4)
    cases = {"close": (e * (1 + 3e-6)).astype(np.float32)}
    late = cases["close"].copy()
    late[7069] += 1e-2
    cases["late"] = late
    nan = cases["close"].copy()
    nan[10] = np.nan
    cases["nan"] = nan
    cases["poison"] = validate.poisoned(e.shape, np.float32)
    cases["short"] = cases["close"][:-1]
    for name, got in cases.items():
        full = validate.compare_output("y", got, e, tol, is_float=True)["passed"]
        assert validate.passes(got, e, tol) == full, name
    assert [validate.passes(cases[n], e, tol) for n in ("close", "late")] == [True, False]
    inf = np.full(3000, np.inf)
    assert validate.passes(inf.astype(np.float32), inf, tol)
    for got in (-inf, np.full(3000, 5.0)):              # the other Inf, or any number, where the reference is Inf
        assert not validate.passes(got, inf, tol)
        assert not validate.compare_output("y", got, inf, tol, is_float=True)["passed"]
    ints = rng.integers(0, 1000, 5000).astype(np.int32)
    off = ints.copy()
    off[4321] += 1
    assert validate.passes(ints, ints.copy(), (0, 0)) and not validate.passes(off, ints, (0, 0))


# -------------------------------------------------------------------------------------- timing_stats
def test_summarize_known_samples():
    s = timing_stats.summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s["median"] == 3.0 and s["min"] == 1.0 and s["mean"] == 22.0
    assert s["iqr"] == pytest.approx(2.0)
    std = float(np.std([1, 2, 3, 4, 100], ddof=1))
    assert s["rse"] == pytest.approx(std / math.sqrt(5) / 22.0)
    assert timing_stats.summarize([5.0])["rse"] == math.inf
    with pytest.raises(ValueError):
        timing_stats.summarize([])


def test_should_stop_on_rse_budget_or_max_reps():
    def stop(samples, elapsed_s, **budget):
        return timing_stats.should_stop(samples, elapsed_s=elapsed_s,
                                        budget=TimingBudget(**{"time_budget_s": 10, "min_time_s": 0.0, **budget}))

    steady = [1.0] * 10
    assert stop(steady[:9], 0.1, min_reps=10) is None
    assert stop(steady, 0.1, min_reps=10) == "rse"
    noisy = [1.0, 3.0] * 10
    assert stop(noisy, 0.1, min_reps=10) is None
    assert stop(noisy, 11, min_reps=10) == "budget"
    assert stop(noisy, 0.1, max_reps=20) == "max_reps"
    assert stop(noisy, 0.1, rse_target=0.2) == "rse"                      # the error target is the budget's
    # a slow kernel past the budget still gets a few samples
    assert stop([50.0, 60.0], 20) is None
    # a short kernel keeps sampling until min_time_s, then stops on the error target
    assert stop(steady, 0.1, min_time_s=0.3) is None
    assert stop(steady, 0.31, min_time_s=0.3) == "rse"
    assert stop([1.0] * 500, 0.1, min_time_s=0.3) == "max_reps"
    assert TimingBudget().min_time_s == 0.3                               # the product's default


def test_hidden_work_threshold():
    assert not timing_stats.hidden_work(1.0, None)
    assert not timing_stats.hidden_work(1.0, 0.01)
    assert timing_stats.hidden_work(0.005, 1.0)


# ------------------------------------------------------------------------------------ speed of light
def _device(bw: float | None = 3000.0, fl: float | None = 50000.0) -> DeviceInfo:
    return DeviceInfo(name="Test GPU", arch="sm_90", compute_capability=(9, 0), sm_count=132,
                      peak_bandwidth_gbs=bw, peak_fp32_gflops=fl)


def test_sol_is_the_larger_of_bytes_and_flops_terms():
    gelu = load_task("gelu").task
    sizes = dict(gelu.benchmark)
    want = gelu.bytes_at(sizes) / 3000e9 * 1e3
    assert speed_of_light.sol_ms(gelu, sizes, _device()) == pytest.approx(max(want, gelu.flops_at(sizes) / 50000e9 * 1e3))
    sgemm = load_task("sgemm").task
    s = dict(sgemm.benchmark)
    tc = _device().model_copy(update={"peak_tf32_tc_gflops": 400000.0, "peak_fp16_tc_gflops": 800000.0})
    # units unknown: fp32 data may run on tf32 tensor cores at best
    assert speed_of_light.sol_ms(sgemm, s, tc) == pytest.approx(sgemm.flops_at(s) / 400000e9 * 1e3)
    # ... and where nobody measured the tensor cores, only the bytes bound it (never a false suspect)
    assert speed_of_light.sol_ms(sgemm, s, _device()) == pytest.approx(sgemm.bytes_at(s) / 3000e9 * 1e3)
    assert speed_of_light.sol_ms(sgemm, s, _device(fl=None)) == pytest.approx(sgemm.bytes_at(s) / 3000e9 * 1e3)
    assert speed_of_light.sol_ms(sgemm, s, None) is None
    assert speed_of_light.sol_ms(sgemm, s, _device(bw=None)) is None


def test_suspect_only_below_the_margin():
    assert speed_of_light.below_sol(0.5, 1.0)
    assert not speed_of_light.below_sol(0.95, 1.0)
    assert not speed_of_light.below_sol(0.5, None)
    assert speed_of_light.pct_of_sol(1.0, 2.0) == 50.0


# --------------------------------------------------------------------------------------- protocol
def test_protocol_round_trips():
    req = ServeRequest(so_path="/x/kernel.so", task_folder="/t/gelu")
    assert ServeRequest.model_validate_json(req.model_dump_json()) == req
    cmd = TimeCommand(sizes={"n": 1 << 20}, sets={"0": {"kind": "fresh", "inputs": {"x": "/s/in_x.npy"}}},
                      dirs={"first": "/x/f", "last": "/x/l", "post": "/x/p", "snap": "/x/s"}, schedule_seed=5,
                      budget=TimingBudget(time_budget_s=2.5, warmup=2, timing_repeats=3))
    line = encode({"cmd": "time", **cmd.model_dump()})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert TimeCommand.model_validate(decode(line)) == cmd
    assert TimeCommand.model_validate(decode(line)).budget == cmd.budget == TimingBudget(time_budget_s=2.5, warmup=2,
                                                                                         timing_repeats=3)
    assert decode(b"not json") is None and decode(b"[1, 2]") is None
    with pytest.raises(ValidationError):
        TimeCommand.model_validate({**cmd.model_dump(), "blank_every": 0})
    case = CaseResult(sizes={"n": 3}, passed=False, reason="y: NaN", first_bad_index=[2], expected=1.0, got=float("nan"))
    resp = EvaluateResponse(device="H100", validation=ValidationResult(passed=False, cases=[case]),
                            timing=TimingResult(sizes={"n": 3}, median_ms=1.0, min_ms=0.9, mean_ms=1.1, iqr_ms=0.1,
                                                rse=0.01, samples_ms=[1.0, 0.9], repetitions=2, stop_reason="rse"),
                            error=WorkerError(status=Status.wrong_answer, message="m", stage="validation"))
    back = EvaluateResponse.model_validate_json(dump_json(resp))     # as the worker writes it: NaN survives
    assert back.error.status == Status.wrong_answer and back.validation.cases[0].first_bad_index == [2]
    assert math.isnan(back.validation.cases[0].got)
    assert back.timing.samples_ms == [1.0, 0.9]
    ro = RunOnceRequest(so_path="a", task_folder="b", sizes={"n": 1}, repeat=3)
    assert RunOnceRequest.model_validate_json(ro.model_dump_json()).repeat == 3
    d = DeviceInfoResponse(info=_device())
    assert DeviceInfoResponse.model_validate_json(d.model_dump_json()).info.compute_capability == (9, 0)
    with pytest.raises(ValidationError):
        RunOnceRequest(so_path="/x.so", task_folder="/t", sizes={"n": 5}, repeat=0)
    with pytest.raises(ValidationError):
        RunOnceRequest.model_validate({"so_path": "/x.so", "sizes": {}})


# ------------------------------------------------------------------------------------------ runner
def test_runner_kills_the_whole_process_group_on_timeout(tmp_path, monkeypatch):
    from cuda_llm.tools.harness.runner import lock_path, run_worker

    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    pidfile = tmp_path / "child.pid"
    script = f"import subprocess, time; p = subprocess.Popen(['sleep', '60']); open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(60)"
    t0 = time.perf_counter()
    out = run_worker([sys.executable, "-c", script], timeout_s=1.5)
    assert out.timed_out and out.rc is None
    assert time.perf_counter() - t0 < 10
    assert lock_path().exists()
    child = int(pidfile.read_text())
    deadline = time.time() + 5
    while time.time() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the worker's child survived the timeout")


def test_runner_reports_exit_code_and_output(tmp_path, monkeypatch):
    from cuda_llm.tools.harness.runner import run_worker

    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    out = run_worker([sys.executable, "-c", "import sys; print('hi'); print('[gpu-worker] case 2/7', file=sys.stderr); sys.exit(3)"],
                     timeout_s=30)
    assert not out.timed_out and out.rc == 3 and out.stdout.strip() == "hi"
    assert out.last_progress() == "case 2/7"
    stamped = run_worker([sys.executable, "-c", "import sys; print('[gpu-worker] +12.34s timing: measuring', file=sys.stderr)"],
                         timeout_s=30)
    assert stamped.last_progress() == "timing: measuring"      # the time stamp is for logs, not for messages


# ------------------------------------------------------------------------- evaluate without device
@pytest.fixture
def no_device(monkeypatch, tmp_path_factory):
    """As on a machine without a GPU (CI): the probe says no device. The compile cache is shared."""
    import cuda_llm.tools.harness.device_info as device_info
    import cuda_llm.tools.harness.evaluate as evaluate

    monkeypatch.setattr(evaluate, "has_cuda_device", lambda: False)
    monkeypatch.setattr(device_info, "has_cuda_device", lambda: False)
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path_factory.getbasetemp() / "harness-cache"))


def test_good_kernel_compiles_then_needs_a_device(no_device):
    from cuda_llm.tools.harness.device_info import get_device_info
    from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate

    assert get_device_info() is None
    loaded = load_task("gelu")
    res = evaluate_candidate(loaded, loaded.task.baseline_path.read_text(), options=EvalOptions(arch="sm_90"))
    assert res.status == Status.no_device, res.message
    assert res.compile is not None and res.compile.ok and res.compile.arch == "sm_90a"
    assert "CUDA device" in res.message and res.validation is None


def test_bad_kernels_are_refused_before_the_device(no_device):
    from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate

    loaded = load_task("gelu")
    good = loaded.task.baseline_path.read_text()
    wrong_sig = good.replace("int n)", "long n)")
    res = evaluate_candidate(loaded, wrong_sig, options=EvalOptions(arch="sm_90"))
    assert res.status == Status.static_error and res.compile is None
    assert any(i.rule == "signature" for i in res.static_issues)
    broken = good.replace("int threads = 256;", "int threads = 256 +;")
    res = evaluate_candidate(loaded, broken, options=EvalOptions(arch="sm_90"))
    assert res.status == Status.compile_error and not res.compile.ok
    assert "compilation failed" in res.message and "candidate.cu:13" in res.compile.errors


def test_baseline_result_without_device_is_not_cached(no_device, tmp_path):
    from cuda_llm.paths import cache_dir
    from cuda_llm.tools.harness.evaluate import EvalOptions, baseline_result

    loaded = load_task("gelu")
    res = baseline_result(loaded, "naive", EvalOptions(arch="sm_90"))
    assert res is not None and res.status == Status.no_device
    assert not list((cache_dir() / "baselines").glob("*.json")) if (cache_dir() / "baselines").exists() else True
    with pytest.raises(ValueError):
        baseline_result(loaded, "fastest")


@pytest.mark.skipif(has_cuda_device(), reason="checks the behaviour without a CUDA device")
def test_eval_command_without_device_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path))
    from cuda_llm.cli import main

    kernel = load_task("gelu").task.baseline_path
    assert main(["eval", "gelu", str(kernel)]) == 2
    cap = capsys.readouterr()
    assert "needs a CUDA device" in (cap.out + cap.err) and "no_device" in cap.out
    assert main(["eval", "gelu", str(kernel), "--json"]) == 2
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "no_device" and data["compile"]["ok"]
    assert main(["eval", "gelu", str(tmp_path / "missing.cu")]) == 2
    err = capsys.readouterr()
    assert "missing.cu" in err.out + err.err


def test_a_large_failed_check_reports_the_same_counts_block_by_block_and_over_threads():
    """The failure diagnosis of a multi-block output (split over threads) gives the counts, the first bad
    element of each kind and the error maxima of a whole-array pass."""
    from concurrent.futures import ThreadPoolExecutor

    from cuda_llm.tools.harness import validate

    n = 5 * validate.CHUNK + 7
    rng = np.random.default_rng(4)
    exp = rng.normal(size=n).astype(np.float32)
    wrong = exp.copy()
    wrong[[3 * validate.CHUNK + 1, n - 1]] += 1.0
    poisoned = wrong.copy()
    poisoned[[validate.CHUNK + 5, 4 * validate.CHUNK]] = validate.poisoned((2,), np.dtype(np.float32))
    nonfinite = wrong.copy()
    nonfinite[[2 * validate.CHUNK + 9]] = np.inf
    with ThreadPoolExecutor(4) as pool:
        for got, kind, count, first in ((wrong, "wrong_values", 2, 3 * validate.CHUNK + 1),
                                        (poisoned, "unwritten", 2, validate.CHUNK + 5),
                                        (nonfinite, "nonfinite", 1, 2 * validate.CHUNK + 9)):
            serial = validate.compare_output("y", got, exp, (1e-5, 1e-5), is_float=True)
            threaded = validate.compare_output("y", got, exp, (1e-5, 1e-5), is_float=True, pool=pool)
            assert repr(serial) == repr(threaded)               # NaN (the poison) is not == itself
            assert not serial["passed"] and serial["kind"] == kind and serial["first_bad_index"] == [first]
            assert serial["reason"].startswith(f"y: {count} ")
            finite = np.isfinite(got)
            assert serial["max_abs_err"] == pytest.approx(float(np.abs(got[finite].astype(np.float64) - exp[finite]).max()))


def test_the_limit_of_one_call_is_max_1_s_and_20x_the_naive_kernel():
    from cuda_llm.tools.harness.timing_budget import call_limit_s, call_limit_text

    assert call_limit_s(None) is None and call_limit_s(0.0) is None        # unknown: only the evaluation's limit
    assert call_limit_s(0.5) == 1.0                                       # 10 ms: the floor
    assert call_limit_s(100.0) == pytest.approx(2.0)                      # 20 x 100 ms
    assert call_limit_s(100.0) > 10 * 100.0 / 1e3                         # a kernel 10x slower than naive is timed
    assert call_limit_text(2.0, 100.0) == "2 s, max(1 s, 20x the naive kernel's 100 ms at the benchmark shape)"


def test_the_limit_of_one_call_comes_from_the_cached_naive_baseline_of_this_device(tmp_path, monkeypatch):
    from cuda_llm.results import EvalResult
    from cuda_llm.tools.harness.eval_options import EvalOptions
    from cuda_llm.tools.harness.evaluate import _baseline_path, with_call_limit

    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path))
    loaded = load_task("gelu")
    dev = DeviceInfo(name="NVIDIA H100 80GB HBM3", arch="sm_90", compute_capability=(9, 0), sm_count=132)
    other = dev.model_copy(update={"name": "NVIDIA A100"})
    assert with_call_limit(loaded, EvalOptions(), dev).budget.call_limit_s is None   # not measured yet
    naive = EvalResult(task="gelu", candidate="naive", source_hash="x", status=Status.ok,
                       timing=TimingResult(sizes={"n": 1}, median_ms=80.0, min_ms=79.0, mean_ms=80.0, iqr_ms=1.0, rse=0.01,
                                           samples_ms=[80.0], repetitions=1, stop_reason="rse"))
    path = _baseline_path(loaded, "naive", loaded.task.baseline_path.read_text(), dev.name)
    path.parent.mkdir(parents=True)
    path.write_text(naive.model_dump_json())
    given = EvalOptions(budget=TimingBudget(time_budget_s=3.0, min_reps=7))
    got = with_call_limit(loaded, given, dev)
    assert got.budget.call_limit_s == pytest.approx(1.6) and got.budget.naive_ms == 80.0
    assert got.budget.model_copy(update={"call_limit_s": None, "naive_ms": None}) == given.budget   # the rest kept
    assert with_call_limit(loaded, EvalOptions(), other).budget.call_limit_s is None   # another GPU's time: not used
    own = EvalOptions(budget=TimingBudget(call_limit_s=9.0))
    assert with_call_limit(loaded, own, dev).budget.call_limit_s == 9.0                # a caller's own
    assert with_call_limit(loaded, EvalOptions(budget=TimingBudget(naive_ms=1.0)), None).budget.call_limit_s == 1.0
