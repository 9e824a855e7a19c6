"""The GPU tests' precompile step (tests/gpu_precompile.py) builds what the tests then find in the cache."""

from __future__ import annotations

import pytest

from adversarial_kernels import ALL, expected
from cuda_llm.results import Status
from cuda_llm.tasks import list_task_names, load_task
from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate
from gpu_precompile import precompile, sources


def test_every_kernel_the_judges_gpu_tests_build_is_listed():
    listed = {src for src, _ in sources()}
    for path in ALL:
        runs = not expected(path) <= {Status.static_error, Status.compile_error}
        assert (path.read_text() in listed) == runs, path.name
    for name in list_task_names():
        task = load_task(name).task
        assert task.baseline_path.read_text() in listed, name
        if task.library_path is not None:
            assert (task.library_path.read_text(), tuple(task.library_links)) in sources(), name


def test_a_precompiled_build_is_what_the_evaluation_finds(monkeypatch, tmp_path, nvcc_path):
    """Same source, flags and arch: the harness's compile is a cache hit after the precompile."""
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path))
    gelu = load_task("gelu")
    monkeypatch.setattr("gpu_precompile.sources",
                        lambda: [(gelu.task.baseline_path.read_text(), ())])
    n, failed, _ = precompile(workers=1)
    assert (n, failed) == (1, 0)
    res = evaluate_candidate(gelu, gelu.task.baseline_path.read_text(), candidate="naive",
                             options=EvalOptions(timing=False))
    assert res.compile is not None and res.compile.ok
    if not res.compile.cached:
        pytest.fail(f"the evaluation compiled again ({res.compile.seconds:.2f} s): the precompile's key differs")
