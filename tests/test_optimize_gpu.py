"""End to end on a GPU: optimize softmax with scripted kernels (naive, better, no better) and real
evaluation; it stops on the plateau with the fastest kernel as best.cu, and a run killed during round 2
and resumed ends with the same best, repeating no LLM call and no measurement.

Runs benchmarks/loop_bench.py as a program (tests and benchmarks do not import each other) and reads its
table and its verdict line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.gpu_long


def test_optimize_softmax_plateau_then_kill_and_resume(tmp_path):
    env = {**os.environ, "CUDA_LLM_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "loop_bench.py"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=560)
    print(proc.stdout[-4000:], proc.stderr[-2000:])
    table = (tmp_path / "out" / "loop.md").read_text()
    assert "stop reason: **plateau**" in table
    assert "repeated evaluations: 0; repeated LLM calls: 0" in table
    assert "CHECKS PASS" in proc.stdout and proc.returncode == 0
