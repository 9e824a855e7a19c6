"""Checks shared by the suite test files: a task's reference against a direct loop, and that every
correctness shape gives finite inputs and a finite reference."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from cuda_llm.tasks import load_task
from cuda_llm.tasks.inputs import make_case_inputs, reference_outputs

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
