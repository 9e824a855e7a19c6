"""Post-mortems: why a candidate ran slower than its parent, or failed.

Every candidate at least ``REGRESSION`` (1.1x) times its parent's time, and every one that failed, gets a
post-mortem: the coder's own plan sentence (what it set out to do: the design, named by the one who wrote
it), what changed against the parent in the builds' facts (kernels, launch shapes, registers, shared memory,
new and vanished instructions: tools/compiler/build_summary.build_diff) and the measured cause. A regression
of ``PROFILE_AT`` (1.5x) or more is profiled and diagnosed like the round's fastest
(review.profile_and_diagnose, through the Evaluator seam), at most ``MAX_PER_ROUND`` per round, the worst
first, so the time spent stays bounded; so is a candidate that passed every correctness case and then
failed at the benchmark shape with a wrong answer; a hang, a crash or a build error is explained by its
failure alone. The text (``postmortem_text``) goes next to the candidate's history line in later prompts,
so a model sees that a design was tried and why it lost; the whole record is kept in
``postmortems/<cid>.json`` for the planner.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from cuda_llm.graph.state import Candidate
from cuda_llm.results import EvalResult, Status

REGRESSION = 1.1                 # this many times the parent's time or slower: a post-mortem
PROFILE_AT = 1.5                 # ... and from this many times, a profile of it (Nsight Compute)
MAX_PER_ROUND = 2                # post-mortem profiles per round (each one Nsight Compute run)
MAX_CAUSE_CHARS = 360
MAX_PLAN_CHARS = 240
MAX_TEXT_CHARS = 900
SLOWER, BENCHMARK_FAILURE, FAILED = "slower", "failed_at_benchmark", "failed"
NOT_FAILURES = ("no_device", "no_code")   # nothing the candidate did: no post-mortem
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
    plan: str = ""                                      # the coder's own plan sentence
    changes: list[str] = Field(default_factory=list)    # what changed against the parent's build

    def text(self) -> str:
        """What later prompts show under the candidate's history line."""
        return postmortem_text(plan=self.plan, changes=self.changes, cause=self.cause, parent=self.parent)


def outcome_of(c: Candidate, res: EvalResult | None) -> str | None:
    """SLOWER, BENCHMARK_FAILURE, FAILED, or None when the candidate needs no post-mortem. Pure."""
    if c.status == Status.ok.value and c.ms and c.parent_ms and c.ms >= REGRESSION * c.parent_ms:
        return SLOWER
    if res is not None and not res.status.passed and res.status not in (Status.no_device,) \
            and res.validation is not None and res.validation.passed:
        return BENCHMARK_FAILURE
    if c.status is not None and c.status not in NOT_FAILURES and c.status not in ("ok", "suspect"):
        return FAILED
    return None


def worth_profiling(outcome: str, res: EvalResult | None, ratio: float | None = None) -> bool:
    """A regression of PROFILE_AT or more, or a benchmark failure that ran to its end (a hang or a crash
    would only repeat itself)."""
    if res is None or res.compile is None or not res.compile.so_path:
        return False
    if outcome == SLOWER:
        return ratio is None or ratio >= PROFILE_AT
    return outcome == BENCHMARK_FAILURE and res.status == Status.wrong_answer


def plan_sentence(answer: str, limit: int = MAX_PLAN_CHARS) -> str:
    """The coder's own plan: the prose of its answer before the source, its first two sentences. Pure."""
    text = (answer or "").split("```", 1)[0]
    text = re.sub(r"^\s*(?:#+\s*)?(?:plan|answer)\s*[:.]\s*", "", text.strip(), flags=re.I)
    text = " ".join(text.split())
    if not text:
        return ""
    cuts = [m.end() for m in re.finditer(r"[.!?](?=\s)", text)]
    if len(cuts) >= 2:
        text = text[:cuts[1]]
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def postmortem_text(*, plan: str, changes: list[str], cause: str, parent: str,
                    limit: int = MAX_TEXT_CHARS) -> str:
    """The post-mortem as one paragraph: the plan, what changed against the parent, the cause. Pure."""
    parts = []
    if plan:
        parts.append(f'the plan: "{plan}"')
    if changes:
        parts.append(f"against {parent}: " + "; ".join(changes))
    if cause:
        parts.append(f"cause: {cause}")
    text = " | ".join(parts)
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


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
        parts.append(f"{ratio:.{1 if ratio >= PROFILE_AT else 2}f}x slower than its parent {parent}"
                     + ("" if ratio >= PROFILE_AT else " (not profiled: below the profiling threshold "
                        f"{PROFILE_AT}x)" if not diagnosis else ""))
    elif outcome == FAILED:
        parts.append("failed" + (f": {' '.join(failure.split())}" if failure else ""))
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
