"""`cuda-llm profile`: real nvcc compile, a fake ncu that replays a recorded H100 report, real parse and diagnosis."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from cuda_llm.cli import main
from cuda_llm.tasks import load_task
from cuda_llm.tools.profile import ncu
from cuda_llm.tools.profile.ncu_parse import profile_from_text

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"


@pytest.fixture
def replay_ncu(tmp_path, monkeypatch):
    """An ncu that 'profiles' by writing an empty report whose import is the recorded gelu raw page."""
    script = tmp_path / "ncu"
    script.write_text(f'''#!/bin/sh
if [ "$1" = "--version" ]; then echo "Version 2025.3.1.0 (build 1)"; exit 0; fi
if [ "$1" = "--import" ]; then cat "{FIXTURES / 'gelu.csv'}"; exit 0; fi
prev=""
for a in "$@"; do
  if [ "$prev" = "--export" ]; then touch "$a.ncu-rep"; fi
  prev="$a"
done
exit 0
''')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv(ncu.NCU_ENV, str(script))
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    ncu._WARNED.clear()
    return script


def test_profile_prints_metrics_and_diagnosis(replay_ncu, tmp_path, capsys, nvcc_path):
    kernel = load_task("gelu").task.baseline_path
    rc = main(["profile", "gelu", str(kernel), "--out", str(tmp_path / "out"), "--no-time"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "gelu_kernel" in out and "DRAM throughput" in out and "long_scoreboard" in out
    assert "bottleneck: memory-bound" in out
    report = json.loads((tmp_path / "out" / "profile.json").read_text())
    assert report["profile"]["available"] is True
    assert report["timing_source"] == "ncu"
    recorded = profile_from_text((FIXTURES / "gelu.csv").read_text())
    assert report["median_ms"] == pytest.approx(recorded.duration_ms)
    assert report["diagnosis"]["bottleneck"] == "memory-bound"
    assert report["compile"]["kernels"][0]["registers"] > 0


def test_profile_json_without_ncu(tmp_path, monkeypatch, capsys, nvcc_path):
    monkeypatch.setenv(ncu.NCU_ENV, str(tmp_path / "missing-ncu"))
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    kernel = load_task("gelu").task.baseline_path
    rc = main(["profile", "gelu", str(kernel), "--json", "--no-time", "--out", str(tmp_path / "o")])
    report = json.loads(capsys.readouterr().out)
    assert rc == 1                                    # nothing profiled: a script must see it
    assert report["profile"]["available"] is False
    assert "ncu not found" in report["profile"]["reason"]
    assert report["diagnosis"]["bottleneck"] == "unknown"


@pytest.mark.parametrize("argv,needle", [
    (["profile", "no_such_task", "k.cu"], "cuda-llm tasks"),
    (["profile", "gelu", "missing.cu"], "no such file"),
    (["profile", "gelu", "{kernel}", "--size", "rows=3"], "NAME=VALUE"),
])
def test_bad_input_is_refused_clearly(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    kernel = str(load_task("gelu").task.baseline_path)
    rc = main([a.replace("{kernel}", kernel) for a in argv])
    assert rc == 2
    assert needle in capsys.readouterr().err


def test_compile_error_exits_1(tmp_path, capsys, monkeypatch, nvcc_path):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    bad = tmp_path / "bad.cu"
    bad.write_text('extern "C" void solve(const float* x, float* y, int n) { undefined_thing(); }\n')
    assert main(["profile", "gelu", str(bad), "--no-time"]) == 1
    assert "compilation failed" in capsys.readouterr().err


def test_empty_file_and_wrong_signature_are_refused_once(tmp_path, capsys, monkeypatch, nvcc_path):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    empty = tmp_path / "empty.cu"
    empty.write_text("\n")
    assert main(["profile", "gelu", str(empty), "--no-time"]) == 2
    assert "is empty" in capsys.readouterr().err
    wrong = tmp_path / "wrong.cu"
    wrong.write_text('__global__ void k(float* y) { y[0] = 1; }\n'
                     'extern "C" void solve(float* y, int n) { k<<<1, 1>>>(y); }\n')
    assert main(["profile", "gelu", str(wrong), "--no-time"]) == 1
    cap = capsys.readouterr()
    assert "refused before compiling" in cap.err and "regs" not in cap.out + cap.err
