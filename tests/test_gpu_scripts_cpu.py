"""The GPU-machine scripts run where device time is scarce: a crash in their reporting would waste a run.
These CPU checks drive their pure parts and their no-device paths."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_llm.tools.device_probe import has_cuda_device
from cuda_llm.results import DeviceInfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def _rows() -> list[dict]:
    return [
        {"task": "gelu", "status": "ok", "median_ms": 0.21, "min_ms": 0.2, "iqr_ms": 0.001, "rse": 0.002,
         "pct_of_sol": 81.0, "spread_pct": 0.4, "compile_s": 1.5, "validation_s": 0.3, "timing_s": 0.8, "eval_s": 1.4,
         "ncu_ms": 0.2, "event_vs_ncu_pct": 5.0},
        {"task": "sgemm", "status": "ok", "median_ms": 40.0, "library_status": "ok", "library_ms": 4.0,
         "library_pct_of_sol": 60.0, "naive_over_library": 10.0, "eval_s": 2.5, "spread_pct": 3.0},
        {"task": "sort_u32", "status": "ok", "median_ms": 9.0, "library_status": "compile_error",
         "library_message": "cub not found"},
        {"task": "broken", "status": "error", "message": "RuntimeError: boom"},
    ]


def test_harness_report_from_rows(tmp_path):
    import harness_bench

    dev = DeviceInfo(name="NVIDIA H100 80GB HBM3", arch="sm_90", compute_capability=(9, 0), sm_count=132,
                     l2_bytes=50 << 20, peak_bandwidth_gbs=3000.0, peak_fp32_gflops=60000.0)
    args = argparse.Namespace(out=tmp_path, repeats=5)
    harness_bench.write_reports(_rows(), dev, args, time.perf_counter())
    md = (tmp_path / "harness.md").read_text()
    assert "H100" in md and "3000 GB/s" in md
    for name in ("gelu", "sgemm", "sort_u32", "broken"):
        assert name in md
    assert "ok/ok" in md and "ok/compile_error" in md
    assert "10.00" in md                                    # naive / library ratio of sgemm
    assert "Naive baselines ok: 3/4" in md and "library baselines ok: 1/2" in md
    assert "broken naive: error: RuntimeError: boom" in md and "sort_u32 library: compile_error" in md
    assert "largest spread of the median over 5 timings (kernels >= 20 us): 3.00 %" in md
    assert not re.search(r"\d\.\d{5,}", md.split("```")[-1]), "summary figures are rounded for reading"
    data = __import__("json").loads((tmp_path / "harness.json").read_text())
    assert data["summary"]["median_eval_s"] == pytest.approx(1.95)
    assert data["summary"]["max_spread_pct_ge_20us"] == pytest.approx(3.0)
    assert data["summary"]["max_event_vs_ncu_pct_ge_50us"] == pytest.approx(5.0)


def test_harness_bench_refuses_unknown_tasks():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "harness_bench.py"), "--tasks", "gelu,nope"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2
    assert "nope" in proc.stderr and "softmax" in proc.stderr


@pytest.mark.skipif(has_cuda_device(), reason="checks the behaviour without a CUDA device")
def test_harness_bench_without_device(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "harness_bench.py"), "--tasks", "gelu",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and "CUDA device" in proc.stderr


def test_torch_bench_refuses_unknown_modules():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "torch_bench.py"), "--modules", "swish,nope"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2
    assert "nope" in proc.stderr and "softmax_rows" in proc.stderr


@pytest.mark.skipif(has_cuda_device(), reason="checks the behaviour without a CUDA device")
def test_torch_bench_without_device(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "torch_bench.py"), "--modules", "swish",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and "CUDA device" in proc.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_run_gpu_script_collects_and_summarizes(tmp_path):
    script = ROOT / "benchmarks" / "run_gpu.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    out = tmp_path / "out"
    stale = ROOT / "bench-out" / "gpu-tests.log"          # left by an earlier call on the same machine
    stale.parent.mkdir(exist_ok=True)
    stale.write_text("FAILED tests/test_old.py::test_stale\n1 failed in 1.0s\n")
    env = {**os.environ, "INSTALL_WHEELS": "0", "OUT": str(out), "STEPS": "features harness",
           "TASKS": "nope", "CUDA_LLM_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    tail = proc.stdout[proc.stdout.rindex("SUMMARY"):]
    assert "features   rc=0" in tail and "harness    rc=2" in tail     # a failing step does not stop the rest
    assert "test_stale" not in proc.stdout and "tests:" not in tail     # no tests step ran in this call
    assert (out / "features.txt").is_file() and "coalesced_access" in (out / "features.txt").read_text()
    assert (out / "harness.log").is_file() and "nope" in (out / "harness.log").read_text()
