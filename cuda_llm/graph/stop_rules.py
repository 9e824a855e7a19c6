"""When the loop stops: budgets, speed of light, failing rounds, plateau, max rounds. Pure functions of the
run's Limits (passed whole) and what the run has spent.

The order: the token and wall-clock budgets; then speed of light (the best kernel reaches ``sol_target``,
default 95%, of the speed-of-light bound: only fewer bytes or flops could still help); then
``max_failed_rounds`` rounds in a row in which no candidate passed; then the plateau; then max rounds.

The plateau rule: the best latency has not improved by more than ``threshold`` (default 2%) over the
reference for ``patience`` rounds. The reference is the best latency when the counter last reset, so
several small improvements that add up past the threshold count as progress. The patience is
``plateau_rounds`` at 50% of speed of light and scales with the headroom left: far from speed of light
a flat round says little (more patience, up to twice), close to it a flat round is the expected outcome
(less, at least one round). A round in which every candidate failed is not a flat round: it says nothing
about how much faster the kernel can get, so it leaves the plateau counter alone (and counts as failed).

Halts are the other kind of stop: something a person must fix (no GPU, a broken naive baseline, a model
that writes no code, an endpoint that keeps failing). Spending more would buy nothing, so the node that
finds it raises ``RunHalted`` (halts.py); the step is not committed, the run is not finished, and ``cuda-llm resume``
repeats that step once the cause is fixed.
"""

from __future__ import annotations

import math

from cuda_llm.graph.state import Limits
from cuda_llm.halts import BASELINE_FAILED, ENDPOINT_ERRORS, NO_CODE, NO_DEVICE, SEED_FAILED, WORKERS_LOST

PLATEAU = "plateau"
MAX_ROUNDS = "max_rounds"
TIME = "time_budget"
TOKENS = "token_budget"
INTERRUPTED = "interrupted"
SPEED_OF_LIGHT = "speed_of_light"
FAILING = "failing"
REFERENCE_HEADROOM = 0.5     # the headroom at which the patience is plateau_rounds
MAX_PATIENCE_FACTOR = 2.0


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
        SPEED_OF_LIGHT: "the best kernel reached the speed-of-light target: only less traffic or work can still help",
        FAILING: "no candidate passed for several rounds in a row",
        NO_DEVICE: "no CUDA device to measure on",
        BASELINE_FAILED: "the task's naive baseline does not pass",
        NO_CODE: "the coder answered without usable code too many times in a row",
        ENDPOINT_ERRORS: "the LLM endpoint failed too many times in a row",
        SEED_FAILED: "the kernel given with --start-from does not pass",
        WORKERS_LOST: "the evaluation workers (GPUs, Ray actors) were lost",
    }
    return texts.get(reason or "", "")


def update_plateau(ref_ms: float | None, count: int, best_ms: float | None, threshold: float, *,
                   round_passed: bool = True) -> tuple[float | None, int]:
    """After a round: (new reference, new counter). Improvement is relative to the reference.
    A round in which no candidate passed leaves both alone (it is not a flat round)."""
    if not round_passed:
        return ref_ms, count
    if best_ms is None:
        return ref_ms, count + 1
    if ref_ms is None or ref_ms <= 0:
        return best_ms, 0
    if (ref_ms - best_ms) / ref_ms > threshold:
        return best_ms, 0
    return ref_ms, count + 1


def update_failed(count: int, round_passed: bool) -> int:
    """Rounds in a row in which no candidate passed."""
    return 0 if round_passed else count + 1


def plateau_patience(base: int, pct_of_sol: float | None) -> int:
    """Flat rounds allowed before the plateau stop, scaled by the headroom to speed of light (see the
    module docstring): ``base`` at 50% of speed of light or when it is unknown."""
    if pct_of_sol is None or base < 1:
        return max(base, 1)
    headroom = min(max(1.0 - pct_of_sol / 100.0, 0.0), 1.0)
    scaled = math.ceil(base * headroom / REFERENCE_HEADROOM - 1e-9)
    return max(1, min(int(round(base * MAX_PATIENCE_FACTOR)), scaled))


def sol_reached(pct_of_sol: float | None, target: float | None) -> bool:
    """The best kernel runs at ``target`` (a fraction, 0.95) of the speed-of-light bound or faster."""
    return target is not None and target > 0 and pct_of_sol is not None and pct_of_sol >= 100.0 * target


def time_exhausted(elapsed_s: float, budget: Limits, next_round_s: float = 0.0) -> bool:
    """True when another round (as long as the last one) would eat into the final validation's reserve."""
    return elapsed_s + max(next_round_s, 0.0) >= budget.time_budget_s - budget.reserve_s


def hard_stop(*, elapsed_s: float, tokens: int, budget: Limits, next_round_s: float = 0.0) -> str | None:
    """Budgets that end the run even in the middle of a round (before a repair, for instance)."""
    if tokens >= budget.token_budget:
        return TOKENS
    if time_exhausted(elapsed_s, budget, next_round_s):
        return TIME
    return None


def stop_after_round(*, round_: int, plateau_count: int, elapsed_s: float, tokens: int, budget: Limits,
                     last_round_s: float = 0.0, best_pct_of_sol: float | None = None,
                     failed_rounds: int = 0) -> str | None:
    """The stop reason at the end of a round, or None to plan another (the order: module docstring)."""
    reason = hard_stop(elapsed_s=elapsed_s, tokens=tokens, budget=budget, next_round_s=last_round_s)
    if reason:
        return reason
    if sol_reached(best_pct_of_sol, budget.sol_target):
        return SPEED_OF_LIGHT
    if budget.max_failed_rounds and failed_rounds >= budget.max_failed_rounds:
        return FAILING
    if plateau_count >= plateau_patience(budget.plateau_rounds, best_pct_of_sol):
        return PLATEAU
    if round_ >= budget.max_rounds:
        return MAX_ROUNDS
    return None
