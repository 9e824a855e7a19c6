"""End to end on a GPU: optimize softmax with scripted kernels (naive, better, no better) and real
evaluation; it stops on the plateau with the fastest kernel as best.cu, and a run killed during round 2
and resumed ends with the same best, repeating no LLM call and no measurement."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

pytestmark = pytest.mark.gpu


def test_optimize_softmax_plateau_then_kill_and_resume(tmp_path, monkeypatch):
    import loop_bench

    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    straight = loop_bench.straight_run(tmp_path / "straight", profile=False)
    assert straight["finished"] and straight["stop_reason"] == "plateau"
    assert loop_bench.best_variant(straight) == loop_bench.FASTEST
    assert straight["final"]["status"] == "ok" and straight["final"]["speedup"] > 2
    per_round, _, _ = loop_bench.checkpoint_growth(Path(straight["root"]), straight["rounds"])
    print(f"\ncheckpoint growth {per_round / 1024:.1f} KiB/round")
    assert per_round <= 50 * 1024

    resumed = loop_bench.killed_and_resumed(tmp_path / "killed")
    assert resumed["finished"] and resumed["stop_reason"] == "plateau"
    assert loop_bench.best_variant(resumed) == loop_bench.FASTEST
    assert resumed["repeated_evaluations"] == 0 and resumed["repeated_llm_calls"] == 0
