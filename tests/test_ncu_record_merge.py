"""tests/fixtures/ncu/record.py merge: a new recording adds kernels without a fixture and keeps the ones
already there (tests check their figures) unless --replace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RECORD = Path(__file__).resolve().parent / "fixtures" / "ncu" / "record.py"


def folder(path: Path, entries: dict[str, str], peaks: dict) -> Path:
    path.mkdir()
    for name, text in entries.items():
        (path / f"{name}.csv").write_text(text)
    (path / "summary.json").write_text(json.dumps({"peaks": peaks, "baselines": {
        name: {"event_ms": float(len(text))} for name, text in entries.items()}}))
    return path


def merge(src: Path, dst: Path, *extra: str) -> str:
    proc = subprocess.run([sys.executable, str(RECORD), "merge", "--from", str(src), "--into", str(dst), *extra],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_merge_adds_new_kernels_and_keeps_existing_ones_unless_told(tmp_path):
    dst = folder(tmp_path / "fixtures", {"sgemm": "old sgemm"}, {"copy": 1})
    src = folder(tmp_path / "rec", {"sgemm": "new sgemm page", "gelu": "gelu page"}, {"copy": 2})
    out = merge(src, dst)
    assert "sgemm: kept the fixture already there (--replace to overwrite it)" in out and "gelu: merged" in out
    summary = json.loads((dst / "summary.json").read_text())["baselines"]
    assert (dst / "sgemm.csv").read_text() == "old sgemm" and summary["sgemm"] == {"event_ms": 9.0}
    assert (dst / "gelu.csv").read_text() == "gelu page" and summary["gelu"]["peaks"] == {"copy": 2}
    assert "sgemm: merged" in merge(src, dst, "--replace")
    assert (dst / "sgemm.csv").read_text() == "new sgemm page"
    assert json.loads((dst / "summary.json").read_text())["baselines"]["sgemm"]["event_ms"] == 14.0
