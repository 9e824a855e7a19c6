"""The harness parts that need no GPU: output comparison and poison, timing statistics and the stopping
rule, the speed-of-light bound, worker request models, the runner's timeout, and `cuda-llm eval` on a
machine without a device (compiles, checks, says testing needs a CUDA device, exit code 2)."""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import pytest
from pydantic import ValidationError

from cuda_llm.tasks import load_task
from cuda_llm.tools import speed_of_light, timing_stats, validate
from cuda_llm.tools.device_probe import has_cuda_device
from cuda_llm.tools.results import DeviceInfo, Status
from cuda_llm.tools.worker_protocol import EvaluateRequest, EvaluateResponse, RunOnceRequest


# ------------------------------------------------------------------------------------------ validate
def test_poison_values_by_dtype():
    assert np.isnan(validate.poison_value(np.float32))
    assert int(validate.poison_value(np.uint32)) == 0xDEADBEEF
    assert int(validate.poison_value(np.int32)) == -559038737
    words = np.full(4, validate.poison_word32(np.float16), dtype=np.uint32).view(np.float16)
    assert np.isnan(words).all()
    assert np.isnan(np.array([validate.poison_word32(np.float32)], np.uint32).view(np.float32)).all()


def test_exact_match_passes_and_reports_errors():
    e = np.linspace(-1, 1, 100)
    r = validate.compare_output("y", e.astype(np.float32), e, (1e-5, 1e-5), is_float=True)
    assert r["passed"] and r["max_abs_err"] < 1e-6


def test_tolerance_failure_names_first_bad_index():
    e = np.zeros((4, 5))
    g = e.astype(np.float32)
    g[2, 3] = 0.5
    g[3, 0] = 0.7
    r = validate.compare_output("y", g, e, (1e-3, 0.0), is_float=True)
    assert not r["passed"] and r["first_bad_index"] == [2, 3]
    assert r["got"] == pytest.approx(0.5) and r["expected"] == 0.0
    assert r["max_abs_err"] == pytest.approx(0.7, rel=1e-6)
    assert "2 of 20" in r["reason"]


def test_relative_tolerance_scales_with_reference():
    e = np.array([1000.0, 1.0])
    g = np.array([1000.05, 1.0], np.float32)
    assert validate.compare_output("y", g, e, (1e-4, 1e-4), is_float=True)["passed"]
    assert not validate.compare_output("y", g, e, (1e-4, 0.0), is_float=True)["passed"]


def test_unwritten_float_output_is_reported_as_poison():
    e = np.ones(10)
    g = validate.poisoned((10,), np.float32)
    g[:9] = 1.0
    r = validate.compare_output("y", g, e, (1e-3, 1e-3), is_float=True)
    assert not r["passed"] and "never written" in r["reason"] and r["first_bad_index"] == [9]


def test_unwritten_int_output_is_reported_as_poison():
    e = np.arange(6, dtype=np.int32)
    g = validate.poisoned((6,), np.int32)
    g[:3] = e[:3]
    r = validate.compare_output("hist", g, e, (0, 0), is_float=False)
    assert not r["passed"] and "never written" in r["reason"] and r["first_bad_index"] == [3]


def test_int_off_by_one_fails_exactly():
    e = np.arange(6, dtype=np.int32)
    g = e.copy()
    g[5] += 1
    r = validate.compare_output("y", g, e, (0, 0), is_float=False)
    assert not r["passed"] and r["first_bad_index"] == [5] and r["got"] == 6


def test_inf_never_passes_even_with_huge_tolerance():
    e = np.ones(4)
    g = np.ones(4, np.float32)
    g[1] = np.inf
    r = validate.compare_output("y", g, e, (1e30, 1.0), is_float=True)
    assert not r["passed"] and "NaN/Inf" in r["reason"]


def test_size_mismatch_fails():
    r = validate.compare_output("y", np.zeros(3, np.float32), np.zeros(4), (1, 1), is_float=True)
    assert not r["passed"] and "3 elements" in r["reason"]


def test_input_mutation_check_is_bitwise_and_nan_safe():
    a = np.array([1.0, np.nan, 3.0], np.float32)
    assert validate.unchanged(a, a.copy())
    b = a.copy()
    b[2] = -3.0
    assert not validate.unchanged(a, b)
    assert validate.first_difference(a, b) == [2]


# -------------------------------------------------------------------------------------- timing stats
def test_summarize():
    s = timing_stats.summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s["median"] == 3.0 and s["min"] == 1.0 and s["mean"] == 22.0 and s["iqr"] == 2.0
    assert s["rse"] == pytest.approx(np.std([1, 2, 3, 4, 100], ddof=1) / np.sqrt(5) / 22.0)
    with pytest.raises(ValueError):
        timing_stats.summarize([])


def test_should_stop_on_rse_budget_and_max():
    steady = [1.0 + 0.001 * (i % 3) for i in range(10)]
    assert timing_stats.should_stop(steady[:5], elapsed_s=0, budget_s=10, min_reps=10) is None
    assert timing_stats.should_stop(steady, elapsed_s=0, budget_s=10, min_reps=10) == "rse"
    noisy = [1.0, 3.0] * 10
    assert timing_stats.should_stop(noisy, elapsed_s=0, budget_s=10) is None
    assert timing_stats.should_stop(noisy, elapsed_s=11, budget_s=10) == "budget"
    assert timing_stats.should_stop(noisy, elapsed_s=0, budget_s=10, max_reps=20) == "max_reps"


def test_hidden_work_rule():
    assert not timing_stats.hidden_work(1.0, 0.005)
    assert timing_stats.hidden_work(0.01, 0.3)
    assert not timing_stats.hidden_work(1.0, None)


# ------------------------------------------------------------------------------------ speed of light
def _device(bw=3000.0, fl=60000.0) -> DeviceInfo:
    return DeviceInfo(name="test", arch="sm_90", compute_capability=(9, 0), sm_count=132,
                      peak_bandwidth_gbs=bw, peak_fp32_gflops=fl)


def test_sol_memory_bound_gelu():
    task = load_task("gelu").task
    sizes = {"n": 1 << 26}
    sol = speed_of_light.sol_ms(task, sizes, _device())
    assert sol == pytest.approx(8 * (1 << 26) / 3000e9 * 1e3)
    assert speed_of_light.sol_ms(task, sizes, None) is None
    assert speed_of_light.sol_ms(task, sizes, _device(bw=None)) is None


def test_sol_takes_the_larger_term_and_skips_flops_for_tensor_cores():
    task = load_task("nbody").task if "nbody" in _names() else load_task("gelu").task
    sizes = task.benchmark
    dev = _device(bw=3000.0, fl=1.0)      # absurdly low flops peak: the flops term dominates
    assert speed_of_light.sol_ms(task, sizes, dev) == pytest.approx(task.flops_at(sizes) / 1e9 * 1e3)
    assert speed_of_light.sol_ms(task, sizes, dev, tensor_cores=True) == pytest.approx(
        task.bytes_at(sizes) / 3000e9 * 1e3)


def _names():
    from cuda_llm.tasks import list_task_names
    return list_task_names()


def test_suspect_margin():
    assert speed_of_light.below_sol(0.5, 1.0)
    assert not speed_of_light.below_sol(0.85, 1.0)      # within the noise margin: an honest kernel
    assert not speed_of_light.below_sol(0.1, None)
    assert speed_of_light.pct_of_sol(1.0, 2.0) == 50.0
    assert speed_of_light.uses_tensor_cores("using namespace nvcuda; wmma::fragment<...> a;")
    assert not speed_of_light.uses_tensor_cores("float x = a * b;")


# ------------------------------------------------------------------------------------ worker protocol
def test_worker_requests_round_trip_and_refuse_bad_input():
    r = RunOnceRequest(so_path="/x.so", task_folder="/t", sizes={"n": 5}, seed=1, repeat=2)
    assert RunOnceRequest.model_validate_json(r.model_dump_json()) == r
    with pytest.raises(ValidationError):
        RunOnceRequest(so_path="/x.so", task_folder="/t", sizes={"n": 5}, repeat=0)
    with pytest.raises(ValidationError):
        RunOnceRequest.model_validate({"so_path": "/x.so", "sizes": {}})
    e = EvaluateRequest(so_path="/x.so", task_folder="/t")
    assert e.held_out and e.timing and e.rse_target == 0.01
    resp = EvaluateResponse.model_validate_json(json.dumps({"device": "d", "error": {"status": "timeout", "message": "m"}}))
    assert resp.error.status == Status.timeout


# ----------------------------------------------------------------------------------------- runner
def test_runner_kills_a_hung_process_group(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path))
    from cuda_llm.tools.runner import run_worker

    t0 = time.perf_counter()
    out = run_worker([sys.executable, "-c", "import subprocess,time; subprocess.Popen(['sleep','30']); "
                      "print('started', flush=True); time.sleep(30)"], timeout_s=1.0)
    assert out.timed_out and out.rc is None and "started" in out.stdout
    assert time.perf_counter() - t0 < 10
    ok = run_worker([sys.executable, "-c", "import sys; print('[gpu-worker] case 1/2', file=sys.stderr)"], timeout_s=20)
    assert ok.rc == 0 and not ok.timed_out and ok.last_progress() == "case 1/2"
    assert (tmp_path / "gpu.lock").exists()


# ------------------------------------------------------------------------------------ no device
@pytest.mark.skipif(has_cuda_device(), reason="checks the behaviour without a CUDA device")
def test_evaluate_without_device_compiles_then_says_no_device(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path))
    from cuda_llm.tools.evaluate import evaluate_candidate

    loaded = load_task("gelu")
    res = evaluate_candidate(loaded, loaded.task.baseline_path.read_text())
    assert res.status == Status.no_device and res.compile is not None and res.compile.ok
    assert "CUDA device" in res.message
    bad = evaluate_candidate(loaded, 'extern "C" void solve(const float* x, float* y) {}')
    assert bad.status == Status.static_error and bad.compile is None


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
