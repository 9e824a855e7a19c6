"""When the loop stops: plateau, max rounds, wall clock, token budget. Pure functions of numbers.

The plateau rule: the best latency has not improved by more than ``threshold`` (default 2%) over the
reference for ``K`` rounds (default 3). The reference is the best latency when the counter last reset,
so several small improvements that add up past the threshold count as progress.

Halts are the other kind of stop: something a person must fix (no GPU, a broken naive baseline, a model
that writes no code, an endpoint that keeps failing). Spending more would buy nothing, so the node that
finds it raises ``RunHalted``; the step is not committed, the run is not finished, and ``cuda-llm resume``
repeats that step once the cause is fixed.
"""

from __future__ import annotations

from dataclasses import dataclass

PLATEAU = "plateau"
MAX_ROUNDS = "max_rounds"
TIME = "time_budget"
TOKENS = "token_budget"
INTERRUPTED = "interrupted"
# halts: the run stops unfinished and resumable
NO_DEVICE = "no_device"
BASELINE_FAILED = "baseline_failed"
NO_CODE = "no_code"
ENDPOINT_ERRORS = "endpoint_errors"
SEED_FAILED = "seed_failed"
HALTS = (NO_DEVICE, BASELINE_FAILED, NO_CODE, ENDPOINT_ERRORS, SEED_FAILED)


def reason_text(reason: str | None, limits: object = None) -> str:
    """What a stop reason means, in words (with the run's numbers where it has them); never repeats the code."""
    k = getattr(limits, "plateau_rounds", None)
    thr = getattr(limits, "plateau_threshold", None)
    rounds = getattr(limits, "max_rounds", None)
    texts = {
        PLATEAU: (f"the best latency did not improve by more than {thr:.0%} for {k} rounds" if k and thr is not None
                  else "the best latency stopped improving"),
        MAX_ROUNDS: f"all {rounds} rounds were run" if rounds else "the maximum number of rounds was reached",
        TIME: "the wall-clock budget is spent (time kept back for the final validation)",
        TOKENS: "the token budget is spent",
        NO_DEVICE: "no CUDA device to measure on",
        BASELINE_FAILED: "the task's naive baseline does not pass",
        NO_CODE: "the coder answered without usable code too many times in a row",
        ENDPOINT_ERRORS: "the LLM endpoint failed too many times in a row",
        SEED_FAILED: "the kernel given with --start-from does not pass",
    }
    return texts.get(reason or "", "")


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


def update_plateau(ref_ms: float | None, count: int, best_ms: float | None, threshold: float) -> tuple[float | None, int]:
    """After a round: (new reference, new counter). Improvement is relative to the reference."""
    if best_ms is None:
        return ref_ms, count + 1
    if ref_ms is None or ref_ms <= 0:
        return best_ms, 0
    if (ref_ms - best_ms) / ref_ms > threshold:
        return best_ms, 0
    return ref_ms, count + 1


@dataclass(frozen=True)
class Budget:
    max_rounds: int
    time_budget_s: float
    token_budget: int
    plateau_rounds: int
    reserve_s: float = 0.0


def time_exhausted(elapsed_s: float, budget: Budget, next_round_s: float = 0.0) -> bool:
    """True when another round (as long as the last one) would eat into the final validation's reserve."""
    return elapsed_s + max(next_round_s, 0.0) >= budget.time_budget_s - budget.reserve_s


def hard_stop(*, elapsed_s: float, tokens: int, budget: Budget, next_round_s: float = 0.0) -> str | None:
    """Budgets that end the run even in the middle of a round (before a repair, for instance)."""
    if tokens >= budget.token_budget:
        return TOKENS
    if time_exhausted(elapsed_s, budget, next_round_s):
        return TIME
    return None


def stop_after_round(*, round_: int, plateau_count: int, elapsed_s: float, tokens: int, budget: Budget,
                     last_round_s: float = 0.0) -> str | None:
    """The stop reason at the end of a round, or None to plan another. Budgets first, then the plateau."""
    reason = hard_stop(elapsed_s=elapsed_s, tokens=tokens, budget=budget, next_round_s=last_round_s)
    if reason:
        return reason
    if plateau_count >= budget.plateau_rounds:
        return PLATEAU
    if round_ >= budget.max_rounds:
        return MAX_ROUNDS
    return None
