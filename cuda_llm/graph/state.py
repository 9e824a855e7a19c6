"""The graph's state: small and serializable, checkpointed after every step.

Only ids, numbers and short summaries live here. Sources, compiler logs, prompts, answers, profiles and
full evaluation results are files in the run directory, referenced by candidate id or content hash:
the SQLite checkpointer stores the changed channels after every step, so anything large here would make
the checkpoint database grow with every round.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from pydantic import BaseModel, Field

from cuda_llm.report.formats import one_line

RESET = "__reset__"
MAX_HISTORY = 8          # history items shown in prompts (read from rounds/r<N>/history.json)
MAX_NOTE_CHARS = 160     # one line per note


def short(text: str | None, limit: int = MAX_NOTE_CHARS) -> str:
    """One line, capped: what state may hold of a message or an error."""
    return one_line(text or "", limit)


def merge_cands(left: dict[str, dict] | None, right: dict[str, dict] | None) -> dict[str, dict]:
    """Reducer of the round's candidates: patches merge by id (parallel coders write side by side);
    an update holding RESET replaces the whole map (a new round)."""
    left = left or {}
    right = right or {}
    if RESET in right:
        return {k: v for k, v in right.items() if k != RESET}
    out = dict(left)
    for cid, patch in right.items():
        out[cid] = {**out.get(cid, {}), **patch}
    return out


def add_tokens(left: dict[str, dict] | None, right: dict[str, dict] | None) -> dict[str, dict]:
    """Reducer of token usage per role: counts add up (parallel LLM calls of one step included)."""
    out = {role: dict(v) for role, v in (left or {}).items()}
    for role, u in (right or {}).items():
        cur = out.setdefault(role, {"input": 0, "output": 0, "calls": 0})
        for k in ("input", "output", "calls"):
            cur[k] = int(cur.get(k, 0)) + int(u.get(k, 0))
    return out


class Limits(BaseModel):
    """Budgets and the plateau rule of one run (fixed when the run starts, kept in state)."""

    max_rounds: int = Field(default=10, ge=1)
    n_candidates: int = Field(default=4, ge=1, le=16)
    time_budget_s: float = Field(default=8 * 3600.0, gt=0)
    token_budget: int = Field(default=2_000_000, ge=1)
    plateau_rounds: int = Field(default=3, ge=1)
    plateau_threshold: float = Field(default=0.02, ge=0.0, lt=1.0)
    reserve_s: float = Field(default=120.0, ge=0)   # kept back for the final validation
    max_repairs: int = Field(default=2, ge=0)        # repair attempts per round
    compile_fix_turns: int = Field(default=2, ge=0)  # build errors sent back to the coder before evaluation
    features_per_candidate: int = Field(default=2, ge=1, le=3)
    # slots per round whose coder gets no assigned features, only the evidence (its features are detected and
    # credited afterwards); at least one slot stays with the feature search (planning.free_slots)
    free_slots: int = Field(default=1, ge=0, le=16)
    max_no_code: int = Field(default=8, ge=0)        # halt after this many candidates in a row without code (0: never)
    max_endpoint_errors: int = Field(default=3, ge=0)  # halt after this many failed LLM calls in a row (0: never)
    # stop rules (stop_rules.py): the fraction of speed of light that ends the run (None: never), and how
    # many rounds in a row without a passing candidate end it
    sol_target: float | None = Field(default=0.95, gt=0, le=1.25)
    max_failed_rounds: int = Field(default=3, ge=1)
    # search (parents.py): how close to the best a stepping stone must be, inspirations per coder
    stone_margin: float = Field(default=0.03, ge=0, lt=1)
    inspirations: int = Field(default=1, ge=0, le=2)
    # refinement turns of a coder on its own passing candidate within a round (refine.py). 0 by default:
    # a turn costs a whole coder answer and an evaluation, and under the manual provider a person's turn
    refine_turns: int = Field(default=0, ge=0, le=3)
    # tuning of declared constants (tune_stage.py): timed points and seconds per candidate
    tune_evals: int = Field(default=16, ge=1)
    tune_seconds: float = Field(default=300.0, gt=0)


class Candidate(BaseModel):
    """One candidate as state knows it (the source is candidates/<id>.cu, the result results/<id>.json)."""

    id: str
    round: int
    slot: int
    parent: str = "baseline"
    parent_ms: float | None = None       # the parent's median when this candidate was asked for
    features: list[str] = Field(default_factory=list)
    repair_of: str | None = None
    attempt: int = 0                     # 0 = first try, k = k-th repair
    turn: int = 0                        # 0 = the coder's first answer, k = its k-th refinement turn
    hash: str | None = None              # source hash (None: the coder gave no usable source)
    status: str | None = None            # None until evaluated; else a Status value or "no_code"/"rejected"
    ms: float | None = None              # median
    lo: float | None = None              # timing interval
    hi: float | None = None
    note: str = ""                       # one line: error or headline
    profile: str = ""                    # one line profile summary
    bottleneck: str = ""
    pct_sol: float | None = None         # % of the speed-of-light bound at the benchmark shape
    tuned: str = ""                      # the tuned point ("BLOCK=256 ITEMS=8"), when the tune stage ran
    cause: str = ""                      # the post-mortem's cause (graph/postmortem.py), when one was made


class BestSummary(BaseModel):
    """The kernel to beat: the naive baseline until a candidate is confirmed faster."""

    id: str = "baseline"
    round: int = 0
    hash: str | None = None
    ms: float | None = None
    lo: float | None = None
    hi: float | None = None
    features: list[str] = Field(default_factory=list)
    profile: str = ""
    bottleneck: str = ""
    pct_sol: float | None = None


class GraphState(TypedDict, total=False):
    run_id: str
    task: str
    seed: bool                           # the run starts from the user's kernel, candidates/seed.cu
    device: str | None                   # GPU name (None without one)
    limits: dict[str, Any]               # Limits
    round: int                           # current round (1-based once planned)
    jobs: list[dict]                     # coder jobs of this round (or repair attempt): small dicts
    cands: Annotated[dict[str, dict], merge_cands]   # this round's candidates by id (Candidate)
    repair_attempt: int
    baseline: dict                       # {ms, lo, hi, status, note}
    best: dict                           # BestSummary
    plateau_ref_ms: float | None         # best latency when the plateau counter last reset
    plateau_count: int                   # rounds without > threshold improvement over plateau_ref_ms
    failed_rounds: int                   # rounds in a row in which no candidate passed
    archive: str                         # the program database, relative to the run directory (program_db.py)
    critique: dict                       # {candidate, bottleneck, summary, next_features, by}; whole: critiques/<cid>.json
    tokens: Annotated[dict[str, dict], add_tokens]   # role -> {input, output, calls}
    evaluations: int
    elapsed_s: float                     # active seconds over every session
    round_started_s: float               # elapsed_s when this round started
    last_round_s: float                  # duration of the last finished round
    round_done: bool
    stop_reason: str | None
    final: dict                          # what finalize measured


def round_cands(state: GraphState) -> list[Candidate]:
    """This round's candidates, in slot/attempt order."""
    cands = [Candidate(**c) for c in (state.get("cands") or {}).values()]
    return sorted(cands, key=lambda c: (c.attempt, c.slot, c.turn, c.id))


def candidate_id(round_: int, slot: int, attempt: int = 0, turn: int = 0) -> str:
    return f"r{round_}c{slot}" + (f"f{attempt}" if attempt else "") + (f"t{turn}" if turn else "")
