"""The code passes its own linter (ruff, configured in pyproject.toml: pyflakes, pycodestyle, bugbear), so
an unused import, an unbound closure variable in a loop or a shadowed name is caught where it is written.
Skips where ruff is not installed (it comes with the `dev` extra)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str] | None:
    try:
        import ruff  # noqa: F401
        return [sys.executable, "-m", "ruff"]
    except ImportError:
        exe = shutil.which("ruff")
        return [exe] if exe else None


def test_the_code_passes_ruff():
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff not installed (pip install -e '.[dev]')")
    out = subprocess.run([*ruff, "check", "--output-format", "concise", "cuda_llm", "tests", "benchmarks"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
