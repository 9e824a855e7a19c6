"""How one candidate is judged: the harness's knobs (build arch, time budgets, repetitions, held-out cases,
retiming, the GPU). Its own module so that the judge, the PyTorch baselines and the evaluation entry point
(evaluate.py) share it without importing one another."""

from __future__ import annotations

from pydantic import BaseModel, Field


CALL_LIMIT_FLOOR_S = 2.0         # a call of solve() may always run this long (module loading, first-call setup)
CALL_LIMIT_FACTOR = 50.0         # ... or this many times the naive kernel's time at the benchmark shape


def call_limit_s(naive_ms: float | None) -> float | None:
    """How long one call of solve() may run before it is a timeout: max(2 s, 50x the naive kernel's time at
    the benchmark shape). None without a measured naive time (then only the evaluation's ``timeout_s``
    holds): a hanging kernel costs seconds, not the whole evaluation's limit, and no honest kernel is near it."""
    if naive_ms is None or naive_ms <= 0:
        return None
    return max(CALL_LIMIT_FLOOR_S, CALL_LIMIT_FACTOR * naive_ms / 1e3)


def call_limit_text(limit_s: float, naive_ms: float | None) -> str:
    """The limit in words, for the timeout message."""
    why = (f"max({CALL_LIMIT_FLOOR_S:g} s, {CALL_LIMIT_FACTOR:g}x the naive kernel's {naive_ms:.4g} ms at the "
           f"benchmark shape)" if naive_ms else "the limit set for one call")
    return f"{limit_s:.3g} s, {why}"


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
    # one call of solve() that runs longer is a timeout (call_limit_s); None: derived from naive_ms when given,
    # else from the naive baseline's cached timing on this device (evaluate.run_compiled), else only timeout_s
    call_limit_s: float | None = Field(default=None, gt=0)
    naive_ms: float | None = None    # the naive kernel's median at the benchmark shape, when the caller knows it
