"""Rules every built-in task meets, whichever issue added it: diverse correctness shapes and held-out
shapes that prompts never show, a benchmark shape that fills an H100, and inputs and a finite reference
at every correctness shape. Task-specific checks (pinned signatures, loop references, tolerances) are in
test_suite_first8.py and test_suite_more.py."""

from __future__ import annotations

import pytest

from cuda_llm.tasks import list_task_names, load_task
from suite_checks import assert_benchmark_fills_an_h100, assert_cases_are_finite, assert_shapes_diverse

ALL = list_task_names()


def test_the_suite_has_twenty_tasks():
    assert len(ALL) >= 20


@pytest.mark.parametrize("name", ALL)
def test_shapes_are_diverse_and_held_out_shapes_are_new(name):
    assert_shapes_diverse(load_task(name).task)


@pytest.mark.parametrize("name", ALL)
def test_benchmark_fills_an_h100(name):
    assert_benchmark_fills_an_h100(load_task(name).task)


@pytest.mark.parametrize("name", ALL)
def test_every_correctness_shape_makes_inputs_and_a_finite_reference(name):
    assert_cases_are_finite(name)
