"""Checks shared by the suite test files: a task's reference against a direct loop, and that every
correctness shape gives finite inputs and a finite reference."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from cuda_llm.tasks import load_task
from cuda_llm.tasks.inputs import dims, make_case_inputs, reference_outputs

Loop = Callable[[dict[str, np.ndarray], dict[str, int]], dict[str, Any]]


def assert_reference_matches_loop(name: str, loop: Loop, cases: list[dict[str, int]]) -> None:
    """The task's NumPy reference equals an independent, direct computation on small inputs."""
    loaded = load_task(name)
    rng = np.random.default_rng(11)
    for sizes in cases:
        inputs = make_case_inputs(loaded, sizes, rng)
        ref = reference_outputs(loaded, inputs, sizes)
        want = loop(inputs, sizes)
        for p in loaded.task.outputs:
            expected = np.asarray(want[p.name], dtype=np.float64).reshape(ref[p.name].shape)
            if p.dtype.is_float:
                np.testing.assert_allclose(ref[p.name], expected, rtol=1e-9, atol=1e-9, err_msg=f"{name} {sizes}")
            else:
                np.testing.assert_array_equal(ref[p.name], expected, err_msg=f"{name} {sizes}")


def assert_cases_are_finite(name: str) -> None:
    """Every correctness shape (held-out ones too) gives finite float inputs and a finite reference."""
    loaded = load_task(name)
    rng = np.random.default_rng(1)
    for sizes, _ in loaded.task.all_cases():
        inputs = make_case_inputs(loaded, sizes, rng)
        for p in loaded.task.inputs:
            if p.dtype.is_float:
                assert np.isfinite(inputs[p.name]).all(), (name, sizes, p.name)
        for out_name, out in reference_outputs(loaded, inputs, sizes).items():
            assert np.isfinite(out.astype(np.float64)).all(), (name, sizes, out_name)


MIN_BENCH_BYTES = 256e6    # a memory-bound benchmark moves at least this much (H100: ~80 us at full speed)
MIN_BENCH_FLOPS = 10e9     # a compute-bound one does at least this much work


def buffer_bytes(task: Any, sizes: dict[str, int]) -> dict[str, int]:
    """Bytes of every pointer parameter at ``sizes``."""
    return {p.name: int(np.prod(dims(p, sizes), dtype=np.int64)) * p.dtype.itemsize
            for p in task.params if p.kind == "pointer"}


def assert_shapes_diverse(task: Any) -> None:
    """Tiny, single-row, not-a-multiple-of-32 and large shapes; held-out shapes new and odd too."""
    shapes = task.shapes
    assert len(shapes) >= 5
    assert any(all(v <= 8 for v in s.values()) for s in shapes), "a tiny shape"
    assert any(min(s.values()) == 1 for s in shapes), "a single row / element"
    odd = [s for s in shapes if any(v > 32 and v % 32 for v in s.values())]
    assert len(odd) >= 2, "shapes that are not multiples of 32"
    assert any(task.bytes_at(s) >= 4e6 or task.flops_at(s) >= 1e8 for s in shapes), "a large shape"
    assert task.held_out and not [s for s in task.held_out if s in shapes]
    assert any(any(v > 32 and v % 32 for v in s.values()) for s in task.held_out), "an odd held-out shape"
    assert task.benchmark not in shapes + task.held_out


def assert_benchmark_fills_an_h100(task: Any) -> None:
    b = task.benchmark
    if task.bound == "memory":
        assert task.bytes_at(b) >= MIN_BENCH_BYTES
    else:
        assert task.flops_at(b) >= MIN_BENCH_FLOPS
    assert sum(buffer_bytes(task, b).values()) < 8 * 2**30, "the benchmark's buffers fit an H100 many times"
    for p in task.params:  # every size is an int parameter: indices must fit it
        if p.kind == "scalar":
            assert b[p.name] < 2**31


# The tasks whose work a vendor library does, and the library (the suite's issue fixes this list).
LIBRARY_TASKS = {"sgemm": "cublas", "hgemm": "cublas", "gemv": "cublas",
                 "reduce_sum": "cub", "prefix_sum": "cub", "histogram": "cub", "sort_u32": "cub"}


def cublas_installed() -> bool:
    """cuBLAS in the CUDA toolkit, or NVIDIA's pip wheel (library_flags then names its folders)."""
    from cuda_llm.tools.compiler.libraries import in_toolkit, library_flags

    return in_toolkit("cublas") or len(library_flags("cublas")) > 1
