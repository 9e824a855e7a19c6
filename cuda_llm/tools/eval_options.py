"""How one candidate is judged: the harness's knobs (build arch, time budgets, repetitions, held-out cases,
retiming, the GPU). Its own module so that the judge, the PyTorch baselines and the evaluation entry point
(evaluate.py) share it without importing one another."""

from __future__ import annotations

from pydantic import BaseModel, Field


class EvalOptions(BaseModel):
    """The defaults are the product's: callers (eval, optimize, tune, benchmarks) override what they must."""

    arch: str | None = None
    timeout_s: float = 120.0
    time_budget_s: float = 10.0
    min_reps: int = 10
    min_time_s: float = 0.3          # sample at least this long (a stable median for short kernels)
    max_reps: int = 500
    rse_target: float = 0.01
    seed: int | None = None
    held_out: bool = True
    timing: bool = True
    allow_libraries: bool = False
    timing_repeats: int = 1        # >1: time the same data again, for the spread of the median (benchmarks)
    gpu: int | None = None         # which visible GPU the worker gets (CUDA_VISIBLE_DEVICES pinned); default the first
    validation_cap_s: float = 20.0  # after a failing case, start no new case once this has passed
    clock_retries: int = Field(default=1, ge=0)  # a timing doubted by the clock check alone is redone this often
