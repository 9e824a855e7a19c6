"""The planner: gives each of the round's N candidates its own set of features to apply."""

from __future__ import annotations

from typing import Any, Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from cuda_llm.agents.context import BestKernel, HistoryItem, TaskBrief, render_device, render_history
from cuda_llm.agents.prompts import render
from cuda_llm.agents.structured import StructuredAnswer, invoke_structured
from cuda_llm.results import DeviceInfo

MAX_FEATURES_PER_CANDIDATE = 3


class OfferedFeature(BaseModel):
    """A ranked feature as offered to the planner."""

    id: str
    name: str = ""
    category: str = ""
    score: float = 0.0
    reason: str = ""
    stats: str = ""  # e.g. "tried 5, compiled 5, passed 4, mean speedup 1.4x"

    @classmethod
    def from_ranked(cls, ranked: Any) -> "OfferedFeature":
        """From a feature_db RankedFeature (feature, score, reason, stats)."""
        f, s = ranked.feature, getattr(ranked, "stats", None)
        stats = ""
        if s is not None:
            tries = getattr(s, "tries", 0)
            if tries:
                stats = f"tried {tries}, compiled {getattr(s, 'compiled', 0)}, passed {getattr(s, 'passed', 0)}"
                if getattr(s, "n_speedups", 0):
                    import math

                    stats += f", mean speedup {math.exp(getattr(s, 'mean_log_speedup', 0.0)):.2f}x over {s.n_speedups}"
            else:
                stats = "untried"
        return cls(id=f.id, name=getattr(f, "name", ""), category=str(getattr(f, "category", "")),
                   score=float(getattr(ranked, "score", 0.0)), reason=str(getattr(ranked, "reason", "")), stats=stats)

    def render(self) -> str:
        parts = [f"- `{self.id}`" + (f" ({self.name}, {self.category})" if self.name else ""), f"score {self.score:.2f}"]
        if self.stats:
            parts.append(self.stats)
        if self.reason:
            parts.append(self.reason)
        return "; ".join(parts)


class PlannerContext(BaseModel):
    task: TaskBrief
    device: DeviceInfo | None = None
    n_candidates: int = Field(default=4, ge=1)
    round_index: int = 0
    offered: list[OfferedFeature]
    best: BestKernel | None = None
    critique: str = ""  # the last critique's summary and suggested features
    history: list[HistoryItem] = Field(default_factory=list)


class CandidatePlan(BaseModel):
    features: list[str] = Field(description="feature ids from the offered list, 1 to 3")
    idea: str = Field(description="how this candidate applies its features to this task")


class PlanAnswer(BaseModel):
    """What the model is asked for (rationale first, so it reasons before choosing)."""

    rationale: str
    candidates: list[CandidatePlan]


class Plan(BaseModel):
    candidates: list[CandidatePlan]
    rationale: str
    adjustments: list[str] = Field(default_factory=list)  # what was changed in the model's answer, and why


def build_planner_messages(ctx: PlannerContext) -> list[BaseMessage]:
    system = render("planner_system", n_candidates=ctx.n_candidates)
    user = render(
        "planner_user",
        round_index=ctx.round_index,
        task=ctx.task.render(),
        device=render_device(ctx.device),
        best=ctx.best.render(with_source=False) if ctx.best else "Current best: the naive baseline (not yet measured).",
        critique=ctx.critique.strip() or "(none yet)",
        history=render_history(ctx.history),
        features="\n".join(f.render() for f in ctx.offered) or "(none offered)",
        n_candidates=ctx.n_candidates,
    )
    return [SystemMessage(content=system), HumanMessage(content=user)]


def normalize_plan(answer: PlanAnswer, offered: Sequence[str], n: int) -> Plan:
    """Keep only offered ids, give every candidate a distinct non-empty set, exactly n candidates.

    Deterministic: padding takes offered features in ranked order, unused ones first.
    """
    offered = list(dict.fromkeys(offered))
    allowed = set(offered)
    notes: list[str] = []
    cands: list[CandidatePlan] = []
    seen_sets: set[frozenset[str]] = set()
    for i, c in enumerate(answer.candidates):
        feats = list(dict.fromkeys(c.features))
        unknown = [f for f in feats if f not in allowed]
        if unknown:
            notes.append(f"candidate {i}: dropped feature ids not offered: {unknown}")
        feats = [f for f in feats if f in allowed]
        if len(feats) > MAX_FEATURES_PER_CANDIDATE:
            notes.append(f"candidate {i}: kept the first {MAX_FEATURES_PER_CANDIDATE} of {len(feats)} features")
            feats = feats[:MAX_FEATURES_PER_CANDIDATE]
        cands.append(CandidatePlan(features=feats, idea=c.idea))
    if len(cands) > n:
        notes.append(f"the model gave {len(cands)} candidates for {n}; kept the first {n}")
        cands = cands[:n]
    elif len(cands) < n:
        notes.append(f"the model gave {len(cands)} candidates for {n}; padded with features from the ranked list")
        cands += [CandidatePlan(features=[], idea="apply the listed features to the current best kernel") for _ in range(n - len(cands))]

    def used() -> list[str]:
        return [f for c in cands for f in c.features]

    for i, c in enumerate(cands):
        key = frozenset(c.features)
        if c.features and key not in seen_sets:
            seen_sets.add(key)
            continue
        if offered:
            pool = [f for f in offered if f not in used()] or offered
            # a fresh feature, or one added to make the set distinct
            for f in pool:
                trial = c.features + [f] if c.features else [f]
                if f not in c.features and frozenset(trial) not in seen_sets:
                    why = "empty" if not c.features else "the same as another candidate's"
                    notes.append(f"candidate {i}: feature set was {why}; added `{f}`")
                    c.features = trial[-MAX_FEATURES_PER_CANDIDATE:]
                    break
        seen_sets.add(frozenset(c.features))
    return Plan(candidates=cands, rationale=answer.rationale, adjustments=notes)


def plan_round(model: Any, ctx: PlannerContext, *, retries: int = 2) -> tuple[Plan, StructuredAnswer]:
    """Ask the planner; the plan is normalized (see Plan.adjustments for what was changed)."""
    answer = invoke_structured(model, build_planner_messages(ctx), PlanAnswer, retries=retries)
    plan = normalize_plan(answer.value, [f.id for f in ctx.offered], ctx.n_candidates)
    return plan, answer
