"""Build, before the first GPU test runs, every kernel the judge's GPU tests (`pytest -m gpu`) compile: the
adversarial kernels, each task's naive baseline and its library yardstick, all at once on every CPU core.

Each test then finds its build in the compile cache (same source, flags and arch: the same key), so the
serial part of the run is the GPU work. Builds are the product's own (tools/compiler/compile.compile_source); a
kernel that fails to build here fails again, with its message, in the test that needs it."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor


def sources() -> list[tuple[str, tuple[str, ...]]]:
    """(source, libraries to link) of every kernel the judge's GPU tests compile through the harness."""
    from adversarial_kernels import ALL, expected
    from cuda_llm.results import Status
    from cuda_llm.tasks import list_task_names, load_task

    refused_before_running = {Status.static_error, Status.compile_error}
    out: list[tuple[str, tuple[str, ...]]] = [(p.read_text(), ()) for p in ALL
                                              if not expected(p) <= refused_before_running]
    for name in list_task_names():
        task = load_task(name).task
        out.append((task.baseline_path.read_text(), ()))
        if task.library_path is not None:
            out.append((task.library_path.read_text(), tuple(task.library_links)))
    return out


def precompile(workers: int | None = None) -> tuple[int, int, float]:
    """(builds, of which failed, seconds). nvcc runs as a subprocess, so threads build in parallel."""
    from cuda_llm.tools.compiler.compile import compile_source

    jobs = sources()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers or max(1, os.cpu_count() or 1)) as pool:
        results = list(pool.map(lambda job: compile_source(job[0], libs=job[1]), jobs))
    return len(results), sum(not r.ok for r in results), time.perf_counter() - t0
