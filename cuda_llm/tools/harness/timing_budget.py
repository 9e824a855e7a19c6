"""How long and how often one kernel is timed: the one declaration of the timing budget.

A run's options, the evaluation options, the GPU worker's time command and the PyTorch timer's request each
hold a ``TimingBudget`` and pass it on whole, so a budget given to a run is the budget the worker loop and
the PyTorch timer stop by. Pydantic only: the GPU worker and the PyTorch timer import it in their child
processes. The limit of one call of solve() lives here too (``call_limit_s``), derived from the naive
kernel's time when the caller gives no limit of its own."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

CALL_LIMIT_FLOOR_S = 1.0         # a call of solve() may always run this long (module loading, first-call setup)
CALL_LIMIT_FACTOR = 20.0         # ... or this many times the naive kernel's time at the benchmark shape: a kernel
                                 # merely 10x slower than the naive one is timed, one that never returns costs ~1 s


def call_limit_s(naive_ms: float | None) -> float | None:
    """How long one call of solve() may run before it is a timeout: max(1 s, 20x the naive kernel's time at
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


class TimingBudget(BaseModel):
    """When the timing loop stops (budget, repetitions, error target), how often it is repeated or redone,
    and how long one call may take. Frozen: whoever holds it passes it on as it is, or makes a changed copy
    (``model_copy(update=...)``). Unknown fields are refused, so a misspelt knob is an error, not a default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    time_budget_s: float = 10.0      # the timing loop stops once this is spent (with at least 3 samples)
    min_reps: int = 10
    min_time_s: float = 0.3          # sample at least this long (a stable median for short kernels)
    max_reps: int = 500
    rse_target: float = 0.01         # stop once the relative standard error of the median is this small
    warmup: int = 3                  # untimed calls before the loop (the first is checked)
    timing_repeats: int = 1          # >1: time the same data again, for the spread of the median (benchmarks)
    clock_retries: int = Field(default=1, ge=0)  # a timing doubted by the clock check alone is redone this often
    # one call of solve() that runs longer is a timeout (call_limit_s); None: derived from naive_ms when given,
    # else from the naive baseline's cached timing on this device (evaluate.with_call_limit), else only the
    # evaluation's timeout
    call_limit_s: float | None = Field(default=None, gt=0)
    naive_ms: float | None = None    # the naive kernel's median at the benchmark shape, when the caller knows it

    def with_naive(self, naive_ms: float | None) -> TimingBudget:
        """This budget with the call limit derived from ``naive_ms`` (unchanged when it has a limit already
        or the naive time is unknown)."""
        limit = call_limit_s(naive_ms)
        if self.call_limit_s is not None or limit is None:
            return self
        return self.model_copy(update={"call_limit_s": limit, "naive_ms": naive_ms})
