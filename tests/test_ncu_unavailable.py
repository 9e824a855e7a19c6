"""Profiling degrades, never crashes: ncu missing, no permission for the counters, or a failing target.

The "ncu" here is a fake: a shell script that prints what a real ncu prints in that situation.
"""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest

from cuda_llm.tasks import load_task
from cuda_llm.tools.profile import ncu
from cuda_llm.tools.profile.diagnosis import diagnose

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"

PERM_OUTPUT = """==PROF== Connected to process 4242 (/usr/bin/python3)
==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the target device 0. For instructions on enabling permissions and to get more information see https://developer.nvidia.com/ERR_NVGPUCTRPERM
==PROF== Disconnected from process 4242
==WARNING== No kernels were profiled.
"""


def fake_ncu(tmp_path: Path, body: str, name: str = "ncu") -> Path:
    script = tmp_path / name
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


@pytest.fixture(autouse=True)
def fresh_warnings(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))     # the device lock file lives there
    ncu._WARNED.clear()
    yield
    ncu._WARNED.clear()


def test_missing_ncu_via_env(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(ncu.NCU_ENV, str(tmp_path / "no-such-ncu"))
    caplog.set_level(logging.WARNING, logger="cuda_llm.tools.profile.ncu")
    loaded = load_task("gelu")
    first = ncu.profile_candidate(loaded, str(tmp_path / "k.so"), out_dir=tmp_path / "p1")
    second = ncu.profile_candidate(loaded, str(tmp_path / "k.so"), out_dir=tmp_path / "p2")
    for r in (first, second):
        assert r.available is False
        assert "ncu not found" in r.reason and ncu.NCU_ENV in r.reason
        assert r.sizes == loaded.task.benchmark
    warnings = [rec for rec in caplog.records if "unavailable" in rec.getMessage()]
    assert len(warnings) == 1                          # shown once, not per candidate


def test_profiling_switched_off(monkeypatch, tmp_path):
    monkeypatch.setenv(ncu.NCU_ENV, "none")
    assert ncu.find_ncu() is None
    r = ncu.profile_command(["true"], out_dir=tmp_path)
    assert not r.available and "ncu not found" in r.reason


def test_permission_error_is_recorded(tmp_path, monkeypatch, caplog):
    out = PERM_OUTPUT.replace("\n", "\\n")
    script = fake_ncu(tmp_path, f'if [ "$1" = "--version" ]; then echo "Version 2025.3.1.0 (build 1)"; exit 0; fi\n'
                                f'printf "{out}"\nexit 1\n')
    monkeypatch.setenv(ncu.NCU_ENV, str(script))
    caplog.set_level(logging.WARNING, logger="cuda_llm.tools.profile.ncu")
    loaded = load_task("gelu")
    results = [ncu.profile_candidate(loaded, str(tmp_path / "k.so"), out_dir=tmp_path / f"p{i}") for i in range(3)]
    for r in results:
        assert r.available is False
        assert r.reason.startswith("ERR_NVGPUCTRPERM")
        assert r.ncu_version == "2025.3.1.0"
        assert r.command[0] == str(script)
    assert sum("ERR_NVGPUCTRPERM" in rec.getMessage() for rec in caplog.records) == 1
    # the request the worker would have read was written beside the log
    assert (tmp_path / "p0" / "profile_request.json").exists()
    assert "ERR_NVGPUCTRPERM" in (tmp_path / "p0" / "profile.log").read_text()
    # and the diagnosis goes on without a profile, saying why
    d = diagnose(results[0], None, None)
    assert d.bottleneck == "unknown"
    assert any("ERR_NVGPUCTRPERM" in e for e in d.evidence)


def test_failing_target_is_not_reported_as_no_kernels(tmp_path, monkeypatch):
    script = fake_ncu(tmp_path, 'if [ "$1" = "--version" ]; then exit 0; fi\n'
                                'echo "Traceback (most recent call last):"\n'
                                'echo "ModuleNotFoundError: No module named pycuda"\n'
                                'echo "==ERROR== The application returned an error code (1)."\n'
                                'echo "==WARNING== No kernels were profiled."\nexit 1\n')
    monkeypatch.setenv(ncu.NCU_ENV, str(script))
    r = ncu.profile_command(["python", "-c", "pass"], out_dir=tmp_path)
    assert not r.available
    assert r.reason.startswith("the profiled program failed (exit code 1)")
    assert "pycuda" in r.reason


def test_hanging_ncu_times_out(tmp_path, monkeypatch):
    script = fake_ncu(tmp_path, 'if [ "$1" = "--version" ]; then exit 0; fi\nsleep 30\n')
    monkeypatch.setenv(ncu.NCU_ENV, str(script))
    r = ncu.profile_command(["true"], out_dir=tmp_path, timeout_s=1.0)
    assert not r.available and "timed out" in r.reason
    assert r.seconds < 10


def test_fake_ncu_with_a_real_report(tmp_path, monkeypatch):
    """The success path end to end: ncu 'writes' a report whose import is a recorded raw page."""
    csv_fixture = FIXTURES / "cross_entropy.csv"
    script = fake_ncu(tmp_path, f'''if [ "$1" = "--version" ]; then echo "Version 2025.3.1.0 (build 1)"; exit 0; fi
if [ "$1" = "--import" ]; then cat "{csv_fixture}"; exit 0; fi
prev=""
for a in "$@"; do
  if [ "$prev" = "--export" ]; then touch "$a.ncu-rep"; fi
  prev="$a"
done
echo "==PROF== Report written"
exit 0
''')
    monkeypatch.setenv(ncu.NCU_ENV, str(script))
    r = ncu.profile_command(["true"], out_dir=tmp_path, name="cand", sizes={"N": 8192, "C": 32768})
    assert r.available and r.reason is None
    assert r.n_kernels == 2
    assert r.report_path == str(tmp_path / "cand.ncu-rep")
    assert Path(r.csv_path).read_text() == csv_fixture.read_text()
    assert "--clock-control" in r.command and "none" in r.command
    assert "SourceCounters" not in r.command


def test_unknown_metric_is_retried_without_extras(tmp_path, monkeypatch):
    csv_fixture = FIXTURES / "gelu.csv"
    script = fake_ncu(tmp_path, f'''if [ "$1" = "--version" ]; then exit 0; fi
if [ "$1" = "--import" ]; then cat "{csv_fixture}"; exit 0; fi
for a in "$@"; do
  if [ "$a" = "--metrics" ]; then echo "==ERROR== Failed to find metric dram__bytes_read.sum"; exit 1; fi
done
prev=""
for a in "$@"; do
  if [ "$prev" = "--export" ]; then touch "$a.ncu-rep"; fi
  prev="$a"
done
exit 0
''')
    monkeypatch.setenv(ncu.NCU_ENV, str(script))
    r = ncu.profile_command(["true"], out_dir=tmp_path)
    assert r.available
    assert "--metrics" not in r.command


def test_source_counters_are_opt_in(tmp_path, monkeypatch):
    from cuda_llm.tools.profile.profile_models import ProfileOptions

    seen = tmp_path / "argv.txt"
    script = fake_ncu(tmp_path, f'if [ "$1" = "--version" ]; then exit 0; fi\necho "$@" > "{seen}"\nexit 1\n')
    monkeypatch.setenv(ncu.NCU_ENV, str(script))
    loaded = load_task("gelu")
    ncu.profile_candidate(loaded, "k.so", out_dir=tmp_path / "a", options=ProfileOptions(source_counters=True))
    assert "SourceCounters" in seen.read_text()
    ncu.profile_candidate(loaded, "k.so", out_dir=tmp_path / "b")
    assert "SourceCounters" not in seen.read_text()
    assert "cuda_llm.tools.harness.gpu_worker run-once --request" in seen.read_text()
