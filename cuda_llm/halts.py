"""Halts: stops a person must fix (no GPU, a broken naive baseline, a model that writes no code, an endpoint
that keeps failing, lost workers). The run stops unfinished and resumable. Raised by the loop (graph/) and
by the measurement service (measure/), so it lives below both.
"""

from __future__ import annotations



# halts: the run stops unfinished and resumable
NO_DEVICE = "no_device"
BASELINE_FAILED = "baseline_failed"
NO_CODE = "no_code"
ENDPOINT_ERRORS = "endpoint_errors"
SEED_FAILED = "seed_failed"
WORKERS_LOST = "workers_lost"   # the GPU pool lost the workers an evaluation was sent to (measure/gpu_pool.py)
HALTS = (NO_DEVICE, BASELINE_FAILED, NO_CODE, ENDPOINT_ERRORS, SEED_FAILED, WORKERS_LOST)


class RunHalted(Exception):
    """Stop the run unfinished, so it can be resumed once ``advice`` is followed. Raised by a node; the step
    that raised is not committed (its LLM answers and measurements stay cached in the run directory)."""

    def __init__(self, reason: str, what: str, advice: str):
        self.reason, self.what, self.advice = reason, what, advice
        super().__init__(f"{reason}: {what}. What to do: {advice}")


def no_code_halt(streak: int, limit: int) -> bool:
    """True when ``streak`` candidates in a row came back without code and the limit is reached."""
    return limit > 0 and streak >= limit


def endpoint_halt(streak: int, limit: int) -> bool:
    """True when ``streak`` LLM calls in a row failed at the endpoint and the limit is reached."""
    return limit > 0 and streak >= limit
