"""The planner: gives each of the round's N candidates its own set of features to apply."""

from __future__ import annotations

import math
from typing import Any, Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field

from cuda_llm.agents.budget import Section, render_budgeted
from cuda_llm.agents.context import CritiqueBrief, HistoryItem, ParentKernel, TaskBrief, render_device, render_history
from cuda_llm.agents.prompts import render
from cuda_llm.agents.settings import DEFAULT_PROMPT_BUDGET
from cuda_llm.agents.structured import StructuredAnswer, invoke_structured
from cuda_llm.results import DeviceInfo

MAX_FEATURES_PER_CANDIDATE = 3
MAX_PLANNER_FREE = 1     # candidates the planner may leave free (no features: the coder's own best step)


class OfferedFeature(BaseModel):
    """A feature as offered to the planner: what the statistics expect of it (the posterior mean of the share
    of the headroom to speed of light that adding it closed, failures counted), how often it was tried, how
    often the coder used it when asked, and who recommends it now."""

    id: str
    name: str = ""
    category: str = ""
    expected_share: float | None = None     # posterior mean of the headroom share closed; 0 = no change expected
    tries: int = 0
    passed: int = 0
    mean_speedup: float | None = None       # over the passing tries, against their parents
    compliance: float | None = None         # share of the asks whose code used it (None: never asked)
    reason: str = ""
    recommended_by: list[str] = Field(default_factory=list)   # "the critic", "the diagnosis"

    @classmethod
    def from_ranked(cls, ranked: Any, recommended_by: Sequence[str] = ()) -> "OfferedFeature":
        """From a feature_db RankedFeature (feature, expected_value, reason, stats, compliance)."""
        f, s = ranked.feature, getattr(ranked, "stats", None)
        tries = int(getattr(s, "tries", 0) or 0) if s is not None else 0
        n_speedups = int(getattr(s, "n_speedups", 0) or 0) if s is not None else 0
        return cls(id=f.id, name=getattr(f, "name", ""), category=str(getattr(f, "category", "")),
                   expected_share=getattr(ranked, "expected_value", None), tries=tries,
                   passed=int(getattr(s, "passed", 0) or 0) if s is not None else 0,
                   mean_speedup=math.exp(s.mean_log_speedup) if n_speedups else None,
                   compliance=getattr(ranked, "compliance", None),
                   reason=str(getattr(ranked, "reason", "")), recommended_by=list(recommended_by))

    def render(self) -> str:
        parts = [f"- `{self.id}`" + (f" ({self.name}, {self.category})" if self.name else "")]
        if self.expected_share is not None and self.tries:
            parts.append(f"expected to close {100 * self.expected_share:+.0f}% of the headroom to speed of light "
                         f"(posterior mean, failures counted)")
        if self.tries:
            tried = f"tried {self.tries}, passed {self.passed}"
            if self.mean_speedup is not None:
                tried += f", mean {self.mean_speedup:.2f}x over the parent when it passed"
            parts.append(tried)
        else:
            parts.append("untried")
        if self.compliance is not None:
            parts.append(f"the coder used it in {100 * self.compliance:.0f}% of the asks")
        if self.recommended_by:
            parts.append("recommended now by " + " and ".join(self.recommended_by))
        return "; ".join(parts)


class PlannerContext(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: TaskBrief
    device: DeviceInfo | None = None
    n_candidates: int = Field(default=4, ge=1)
    round_index: int = 0
    offered: list[OfferedFeature]
    best: ParentKernel | None = None     # the kernel the round starts from
    critique: CritiqueBrief | None = None
    history: list[HistoryItem] = Field(default_factory=list)
    free_slots: int = Field(default=0, ge=0)   # further candidates of the round that are free (not planned here)
    blocked: list[list[str]] = Field(default_factory=list)   # feature sets that failed or regressed on this parent
    budget_chars: int = DEFAULT_PROMPT_BUDGET["planner"]


class CandidatePlan(BaseModel):
    features: list[str] = Field(description="feature ids from the offered list, 1 to 3; none leaves the candidate "
                                            "free: its coder takes the best next step it sees in the evidence")
    idea: str = Field(description="how this candidate applies its features to this task: the whole design a coder "
                                  "needs (work per thread and block, tile sizes, what stays in registers or shared "
                                  "memory, launch shape)")


class PlanAnswer(BaseModel):
    """What the model is asked for (rationale first, so it reasons before choosing)."""

    rationale: str
    candidates: list[CandidatePlan]


class Plan(BaseModel):
    candidates: list[CandidatePlan]
    rationale: str
    adjustments: list[str] = Field(default_factory=list)  # what was changed in the model's answer, and why


def build_planner_messages(ctx: PlannerContext) -> list[BaseMessage]:
    system = render("planner_system", n_candidates=ctx.n_candidates, max_features=MAX_FEATURES_PER_CANDIDATE)
    parent = (ctx.best.render_head() + "\n" + ctx.best.render_evidence()) if ctx.best else \
        "Parent: the naive baseline (not yet measured)."
    sections = [
        Section(name="history", text=render_history(ctx.history), priority=10, label="earlier attempts"),
        Section(name="parent", text=parent, priority=20, label="the parent's measurements"),
        Section(name="critique", text=ctx.critique.render() if ctx.critique else "(none yet)", priority=30,
                label="the last critique"),
    ]
    user, _ = render_budgeted(
        "planner_user", sections, ctx.budget_chars,
        round_index=ctx.round_index, task=ctx.task.render(), device=render_device(ctx.device),
        features="\n".join(f.render() for f in ctx.offered) or "(none offered)", n_candidates=ctx.n_candidates,
        free_note=_free_note(ctx), blocked=_blocked_note(ctx),
    )
    return [SystemMessage(content=system), HumanMessage(content=user)]


def _free_note(ctx: PlannerContext) -> str:
    if not ctx.free_slots:
        return ""
    many = ctx.free_slots > 1
    return (f"Besides these, {ctx.free_slots} more candidate{'s' if many else ''} of this round "
            f"{'are' if many else 'is'} free: {'their coders get' if many else 'its coder gets'} the same evidence "
            "and no assigned features, and the features used are detected and credited afterwards.")


def _blocked_note(ctx: PlannerContext) -> str:
    if not ctx.blocked:
        return ""
    sets = "; ".join("[" + ", ".join(b) + "]" for b in ctx.blocked)
    return (f"Feature sets that already failed or regressed on this parent (not given again unless changed): "
            f"{sets}.")


def normalize_plan(answer: PlanAnswer, offered: Sequence[str], n: int,
                   blocked: Sequence[Sequence[str]] = ()) -> Plan:
    """Keep only offered ids, give every candidate a distinct set, exactly n candidates.

    A candidate the model left without features on purpose is free (at most MAX_PLANNER_FREE of them); one
    whose ids were all dropped, or whose set is another's or ``blocked`` (it failed or regressed on this
    parent), gets a feature added. Deterministic: padding takes offered features in ranked order, unused ones
    first.
    """
    offered = list(dict.fromkeys(offered))
    allowed = set(offered)
    notes: list[str] = []
    cands: list[CandidatePlan] = []
    no = {frozenset(b) for b in blocked}
    seen_sets: set[frozenset[str]] = set(no)
    free: set[int] = set()
    for i, c in enumerate(answer.candidates):
        if not c.features and len(free) < MAX_PLANNER_FREE and i < n:
            free.add(i)
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
        if i in free:
            continue
        if c.features and key not in seen_sets:
            seen_sets.add(key)
            continue
        if offered:
            pool = [f for f in offered if f not in used()] or offered
            # a fresh feature, or one added to make the set distinct
            for f in pool:
                trial = c.features + [f] if c.features else [f]
                if f not in c.features and frozenset(trial) not in seen_sets:
                    why = "empty" if not c.features else \
                        "one that failed on this parent before" if key in no else "the same as another candidate's"
                    notes.append(f"candidate {i}: feature set was {why}; added `{f}`")
                    c.features = trial[-MAX_FEATURES_PER_CANDIDATE:]
                    break
        seen_sets.add(frozenset(c.features))
    return Plan(candidates=cands, rationale=answer.rationale, adjustments=notes)


def plan_round(model: Any, ctx: PlannerContext, *, retries: int = 2) -> tuple[Plan, StructuredAnswer]:
    """Ask the planner; the plan is normalized (see Plan.adjustments for what was changed)."""
    answer = invoke_structured(model, build_planner_messages(ctx), PlanAnswer, retries=retries)
    plan = normalize_plan(answer.value, [f.id for f in ctx.offered], ctx.n_candidates, ctx.blocked)
    return plan, answer
