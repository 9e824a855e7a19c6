"""Post-mortems: why a candidate ran far slower than its parent, or failed only at the benchmark shape.

A regression (at least ``REGRESSION`` times its parent's time) is profiled and diagnosed like the round's
fastest (review.profile_and_diagnose, through the Evaluator seam), at most ``MAX_PER_ROUND`` per round, the
worst first, so the time spent stays bounded. A candidate that passed every correctness case and then
failed at the benchmark shape is profiled too when it ran to the end (a wrong answer); a hang or a crash
is explained by its failure alone. The cause, one short paragraph built from the diagnosis by the pure
``cause_text``, goes next to the candidate's history line in later prompts, and the whole record
(parent, assigned features, outcome, cause) is kept in ``postmortems/<cid>.json`` for the planner.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from cuda_llm.graph.state import Candidate
from cuda_llm.results import EvalResult, Status

REGRESSION = 1.5                 # this many times the parent's time or slower: a post-mortem
MAX_PER_ROUND = 2                # post-mortem profiles per round (each one Nsight Compute run)
MAX_CAUSE_CHARS = 360
SLOWER, BENCHMARK_FAILURE = "slower", "failed_at_benchmark"
FOLDER = "postmortems"


class PostMortem(BaseModel):
    """What went wrong with one candidate: what it was asked for, how it ended, and why (see the module doc)."""

    candidate: str
    round: int
    parent: str
    features: list[str] = Field(default_factory=list)    # the features it was asked to apply
    outcome: str                                        # SLOWER or BENCHMARK_FAILURE
    status: str
    ms: float | None = None
    parent_ms: float | None = None
    ratio: float | None = None                          # ms / parent_ms
    bottleneck: str = ""
    profiled: bool = False
    cause: str


def outcome_of(c: Candidate, res: EvalResult | None) -> str | None:
    """SLOWER, BENCHMARK_FAILURE, or None when the candidate needs no post-mortem. Pure."""
    if c.status == Status.ok.value and c.ms and c.parent_ms and c.ms >= REGRESSION * c.parent_ms:
        return SLOWER
    if res is not None and not res.status.passed and res.status not in (Status.no_device,) \
            and res.validation is not None and res.validation.passed:
        return BENCHMARK_FAILURE
    return None


def worth_profiling(outcome: str, res: EvalResult | None) -> bool:
    """A regression, or a benchmark failure that ran to its end (a hang or a crash would only repeat itself)."""
    if res is None or res.compile is None or not res.compile.so_path:
        return False
    return outcome == SLOWER or res.status == Status.wrong_answer


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    cut = text.find(". ")
    return text if cut < 0 else text[:cut + 1]


def cause_text(outcome: str, *, parent: str, ratio: float | None = None, diagnosis: dict[str, Any] | None = None,
               failure: str = "", limit: int = MAX_CAUSE_CHARS) -> str:
    """One short paragraph: how it ended, the diagnosis's verdict and its largest estimated losses, the warp
    stall mix. Pure: built from a recorded diagnosis (``Diagnosis.model_dump``) and the failure note."""
    parts = []
    if outcome == SLOWER and ratio is not None:
        parts.append(f"{ratio:.1f}x slower than its parent {parent}")
    elif outcome == BENCHMARK_FAILURE:
        parts.append("passed the correctness cases, then failed at the benchmark shape"
                     + (f": {' '.join(failure.split())}" if failure else ""))
    d = diagnosis or {}
    bottleneck = str(d.get("bottleneck") or "")
    if bottleneck and bottleneck != "unknown":
        summary = _first_sentence(str(d.get("summary") or ""))
        parts.append(f"{bottleneck}: {summary}" if summary else bottleneck)
        losses = [x for x in d.get("losses") or [] if x.get("share_pct")]
        if losses:
            parts.append("estimated time lost: " + ", ".join(f"{x['share_pct']:.0f}% to {x['rule']}" for x in losses[:2]))
        evidence = [str(e) for e in d.get("evidence") or []]
        stalls = next((e for e in evidence if "stall" in e), None)
        if stalls:
            parts.append(stalls)
    text = "; ".join(p.rstrip(".") for p in parts if p) + "."
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def write(rundir: Any, pm: PostMortem) -> Path:
    return rundir.write_text(f"{FOLDER}/{pm.candidate}.json", pm.model_dump_json(indent=1))


def load_all(root: Path) -> list[PostMortem]:
    """Every post-mortem of a run, oldest round first (what a planner rule reads)."""
    out = []
    for p in sorted((Path(root) / FOLDER).glob("*.json")):
        try:
            out.append(PostMortem.model_validate(json.loads(p.read_text())))
        except (OSError, ValueError):
            continue
    return sorted(out, key=lambda pm: (pm.round, pm.candidate))
