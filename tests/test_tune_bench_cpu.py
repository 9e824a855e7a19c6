"""benchmarks/tune_bench.py on the CPU: the replay of the search over an exhaustive table
(cuda_llm/tools/tune/tune_replay.py), its report (cuda_llm/report/tune_report.py) and the script's no-device exit,
so that a run on the GPU machine does not fail in its reporting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_llm.report.tune_report import tune_markdown
from cuda_llm.results import CompileResult, EvalResult, Status, TimingResult
from cuda_llm.tools.tune.tune_replay import ExhaustiveTable, summarize
from cuda_llm.tools.tune.tuning import all_points, parse_tunables

ROOT = Path(__file__).resolve().parents[1]


def _table(drop: int = 0) -> ExhaustiveTable:
    """reduce_items.cu's 20 points: fastest at BLOCK=512, ITEMS_PER_THREAD=8; BLOCK=1024 x 16 invalid."""
    source = (ROOT / "tests" / "fixtures" / "tune" / "reduce_items.cu").read_text()
    tunables = parse_tunables(source)
    table = {}
    for p in all_points(tunables):
        b, k = int(p["BLOCK"]), int(p["ITEMS_PER_THREAD"])
        ok = b * k < 16384
        comp = CompileResult(ok=ok, arch="sm_90", source_hash="x", errors="" if ok else "static assertion failed")
        res = None
        if ok:
            ms = 0.3 + abs(b - 512) / 5000 + abs(k - 8) / 100
            t = TimingResult(sizes={"n": 1}, median_ms=ms, min_ms=ms, mean_ms=ms, iqr_ms=0.0, rse=0.0, samples_ms=[ms],
                             repetitions=1, stop_reason="rse", pct_of_sol=100 * 0.3 / ms)
            res = EvalResult(task="reduce_sum", candidate="p", source_hash="x", status=Status.ok, timing=t)
        table[tuple(p.values())] = (comp, res)
    for key in list(table)[len(table) - drop:]:
        del table[key]
    return ExhaustiveTable(task="reduce_sum", source=source, tunables=tunables, table=table, compile_s=1.0,
                           measure_s=2.0)


def test_replay_and_report():
    summary = summarize(_table(), budget=8, seeds=3)
    assert summary["space"] == 20 and summary["passing"] == 19 and summary["valid"] == 19
    assert summary["best"]["params"] == {"BLOCK": "512", "ITEMS_PER_THREAD": "8"}
    assert summary["written"]["params"] == {"BLOCK": "256", "ITEMS_PER_THREAD": "4"}
    assert len(summary["runs"]) == 3 and all(r["evaluations"] <= 8 for r in summary["runs"])
    assert all(r["ratio"] >= 1.0 for r in summary["runs"]) and summary["median_ratio"] >= 1.0
    text = tune_markdown([summary], "test device", 8, 3)
    assert "| reduce_sum | 20 (19) | BLOCK=256 ITEMS_PER_THREAD=4 |" in text
    assert "BLOCK=512 ITEMS_PER_THREAD=8" in text and "## reduce_sum: every point" in text
    assert text.count("compile_error") == 1


def test_a_table_without_every_point_is_refused():
    with pytest.raises(ValueError, match=r"every point of its space \(20\).*1 missing"):
        _table(drop=1)


def test_without_a_device_the_benchmark_says_so(tmp_path):
    """No visible device (CUDA_VISIBLE_DEVICES empty, so this runs on a GPU machine too): exit 2 and why."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tune_bench.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert proc.returncode == 2 and "no CUDA device" in proc.stderr
    typo = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tune_bench.py"), "--out", str(tmp_path),
                           "--tasks", "sgemm,reduce_summ"], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert typo.returncode == 2 and "unknown kernel 'reduce_summ'" in typo.stderr   # said before the device check


@pytest.mark.parametrize("name", ["sgemm_tiled.cu", "reduce_items.cu", "transpose_tiled.cu"])
def test_the_parametric_kernels_declare_their_spaces(name):
    ts = parse_tunables((ROOT / "tests" / "fixtures" / "tune" / name).read_text())
    assert len(ts) >= 2 and all(len(t.values) >= 2 for t in ts)
