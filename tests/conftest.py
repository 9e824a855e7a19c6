"""Shared fixtures. Tests marked `gpu` or `gpu_long` are skipped only where the driver reports no CUDA device.
Every test writes into temporary folders only (tests/isolation.py): the session's cache, feature database and
XDG cache folder are set before any test runs, and a write that still reaches the user's cache or the
checkout's runs/ fails the session."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from isolation import WriteGuard
from cuda_llm.tools.device.device_probe import has_cuda_device

ROOT = Path(__file__).resolve().parents[1]
_GUARD: WriteGuard | None = None
_BASE: Path | None = None


def _protected() -> list[Path]:
    """What a test must never write: the user's own cache (and a feature database they named), the runs/ of
    the checkout and of the folder pytest started in."""
    from platformdirs import user_cache_dir

    roots = [Path(user_cache_dir("cuda-llm")), ROOT / "runs", Path.cwd() / "runs"]
    if os.environ.get("CUDA_LLM_FEATURE_DB"):
        roots.append(Path(os.environ["CUDA_LLM_FEATURE_DB"]).expanduser())
    return roots


def pytest_configure(config):
    """Before collection (test modules read settings at import): the cache, the feature statistics and
    platformdirs' cache folder of this process and every child it starts point into one session folder."""
    global _GUARD, _BASE
    if _GUARD is not None:
        return
    protected = _protected()
    base = _BASE = Path(tempfile.mkdtemp(prefix="cuda-llm-tests-"))
    os.environ["CUDA_LLM_CACHE"] = str(base / "cache")
    os.environ["CUDA_LLM_FEATURE_DB"] = str(base / "cache" / "feature_stats.sqlite")
    os.environ["XDG_CACHE_HOME"] = str(base / "xdg-cache")
    _GUARD = WriteGuard(protected)
    sys.addaudithook(_GUARD)


def pytest_sessionfinish(session, exitstatus):
    if _GUARD is not None and _GUARD.hits:
        print("\ntests wrote outside their temporary folders:\n  " + "\n  ".join(_GUARD.hits), file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config):
    if _BASE is not None:
        shutil.rmtree(_BASE, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    if has_cuda_device():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (none reported by the driver here)")
    for item in items:
        if "gpu" in item.keywords or "gpu_long" in item.keywords:
            item.add_marker(skip)


def pytest_collection_finish(session):
    """Where the judge's GPU tests will run, build their kernels first, in parallel (tests/gpu_precompile.py)."""
    if not any("gpu" in item.keywords for item in session.items) or not has_cuda_device():
        return
    from gpu_precompile import precompile

    n, failed, seconds = precompile()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"precompiled {n} kernels for the GPU tests in {seconds:.1f} s ({failed} did not build)")


@pytest.fixture(scope="session")
def nvcc_path() -> str:
    path = shutil.which("nvcc") or ("/usr/local/bin/nvcc" if shutil.which("/usr/local/bin/nvcc") else None)
    if path is None:
        pytest.fail("nvcc is required for the compile tests (CUDA toolkit on PATH)")
    return path
