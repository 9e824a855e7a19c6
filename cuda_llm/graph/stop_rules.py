"""When the loop stops: plateau, max rounds, wall clock, token budget. Pure functions of numbers.

The plateau rule: the best latency has not improved by more than ``threshold`` (default 2%) over the
reference for ``K`` rounds (default 3). The reference is the best latency when the counter last reset,
so several small improvements that add up past the threshold count as progress.
"""

from __future__ import annotations

from dataclasses import dataclass

PLATEAU = "plateau"
MAX_ROUNDS = "max_rounds"
TIME = "time_budget"
TOKENS = "token_budget"
INTERRUPTED = "interrupted"

REASON_TEXT = {
    PLATEAU: "plateau: best latency did not improve by more than the threshold for K rounds",
    MAX_ROUNDS: "maximum number of rounds reached",
    TIME: "wall-clock budget spent (time kept back for the final validation)",
    TOKENS: "token budget spent",
}


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
