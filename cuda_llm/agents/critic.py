"""The critic: reads the measured evidence and says what limits the kernel and the one change to make next.

It is shown the whole source of what it judges, the diff against that candidate's own parent, the whole
roofline, the profile evidence, ptxas resources, the catalogue features that apply to the task and what
was tried and how it ended. The rule-based diagnosis is always in its prompt, and stands in (as the
caller's ``fallback``) when the LLM fails for any reason, or when the role is played by ``rules``.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field

from cuda_llm.agents.budget import Section, render_budgeted
from cuda_llm.agents.context import (
    BuildBrief, CritiqueBrief, DiagnosisBrief, FeatureBrief, HistoryItem, TaskBrief, render_device, render_history,
    render_resources, speedup_text,
)
from cuda_llm.agents.errors import LLMError
from cuda_llm.agents.prompts import render
from cuda_llm.agents.settings import DEFAULT_PROMPT_BUDGET
from cuda_llm.agents.structured import invoke_structured
from cuda_llm.agents.usage import TokenUsage
from cuda_llm.results import NAIVE_BASELINE, DeviceInfo, KernelResources

Bottleneck = Literal["memory-bound", "compute-bound", "latency-bound", "occupancy-bound", "launch-bound",
                     "divergence", "bank-conflicts", "algorithm-bound", "unknown"]

__all__ = ["Bottleneck", "Critique", "CriticContext", "DiagnosisBrief", "critique", "critique_from_diagnosis",
           "build_critic_messages", "brief_of"]


class Critique(BaseModel):
    bottleneck: Bottleneck
    evidence: list[str]
    next_features: list[str]
    change: str = Field(description="the one concrete change to make next, in a sentence or two")
    expected_gain: str
    summary: str


class CriticContext(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: TaskBrief
    device: DeviceInfo | None = None
    build: BuildBrief | None = None
    candidate: str
    parent: str = ""                        # the candidate's own parent (what the diff is against)
    features: list[str] = Field(default_factory=list)  # what it was asked to apply
    idea: str = ""                          # the planner's idea for it
    median_ms: float | None = None
    speedup: float | None = None            # over the task's baseline
    baseline_label: str = NAIVE_BASELINE    # Task.baseline_label: naive, or PyTorch eager
    speedup_over_parent: float | None = None
    status: str = "ok"
    roofline: str = ""                      # every field: intensity, attainable ms, % of SOL, limiter, ...
    metrics: str = ""                       # profile evidence; empty when profiling was unavailable
    profile_unavailable_reason: str = ""
    resources: list[KernelResources] = Field(default_factory=list)
    compile_warnings: list[str] = Field(default_factory=list)
    build_notes: list[str] = Field(default_factory=list)   # ptxas messages that cost speed (wgmma serialized, spills)
    sass: list[str] = Field(default_factory=list)          # the build's machine code summarized (instruction mix, loops)
    source: str = ""                        # the whole source of what is judged
    diff: str = ""                          # make_diff(parent_source, source)
    diagnosis: DiagnosisBrief               # always given
    catalogue: list[FeatureBrief]           # the features that apply to this task
    history: list[HistoryItem] = Field(default_factory=list)
    budget_chars: int = DEFAULT_PROMPT_BUDGET["critic"]


def critique_from_diagnosis(diagnosis: Any, catalogue_ids: list[str] | None = None) -> Critique:
    """The critique built from the rule-based diagnosis (the fallback, and the ``rules`` critic)."""
    d = diagnosis if isinstance(diagnosis, DiagnosisBrief) else DiagnosisBrief.from_diagnosis(diagnosis)
    feats = [f for f in d.suggested_features if catalogue_ids is None or f in catalogue_ids]
    bottleneck = d.bottleneck if d.bottleneck in Bottleneck.__args__ else "unknown"
    change = f"apply {feats[0]} where the evidence above points" if feats else ""
    return Critique(bottleneck=bottleneck, evidence=d.evidence, next_features=feats, change=change,
                    expected_gain="unknown (rule-based diagnosis)", summary=d.summary or f"rule-based: {bottleneck}")


def brief_of(crit: Critique, candidate: str, *, by: str = "critic") -> CritiqueBrief:
    """A critique as the planner and the coders are shown it."""
    return CritiqueBrief(candidate=candidate, bottleneck=crit.bottleneck, summary=crit.summary, evidence=crit.evidence,
                         change=crit.change, expected_gain=crit.expected_gain, next_features=crit.next_features, by=by)


def build_critic_messages(ctx: CriticContext) -> list[BaseMessage]:
    timing = ctx.status
    if ctx.median_ms is not None:
        timing += f", {ctx.median_ms:.4f} ms"
    if ctx.speedup is not None:
        timing += ", " + speedup_text(ctx.speedup, ctx.baseline_label)
    if ctx.speedup_over_parent is not None:
        timing += f", {ctx.speedup_over_parent:.2f}x its parent"
    compile_report = render_resources(ctx.resources)
    if ctx.compile_warnings:
        compile_report += "\nWarnings:\n" + "\n".join(f"- {w}" for w in ctx.compile_warnings[:10])
    if ctx.build_notes:
        compile_report += "\nptxas messages that cost speed:\n" + "\n".join(f"- {w}" for w in ctx.build_notes)
    if ctx.sass:
        compile_report += "\nMachine code (SASS), summarized:\n" + "\n".join(f"- {w}" for w in ctx.sass)
    metrics = ctx.metrics.strip() or f"(not profiled: {ctx.profile_unavailable_reason or 'unavailable'})"
    catalogue = "\n".join(f"- {f.id}: {f.name} — {f.bottleneck}" for f in ctx.catalogue) or "(empty)"
    sections = [
        Section(name="history", text=render_history(ctx.history), priority=10, label="earlier attempts"),
        Section(name="catalogue", text=catalogue, priority=20, label="the feature catalogue"),
        Section(name="diff", text=ctx.diff.strip() or "(none)", priority=30, label=f"the diff against {ctx.parent or 'the parent'}"),
        Section(name="source", text=ctx.source.strip() or "(not available)", priority=40, drop=False,
                label=f"the source of {ctx.candidate}"),
        Section(name="metrics", text=metrics, priority=50, label="the profile evidence"),
    ]
    user, _ = render_budgeted(
        "critic_user", sections, ctx.budget_chars,
        task=ctx.task.render(), device=render_device(ctx.device),
        build=ctx.build.render() if ctx.build else "", candidate=ctx.candidate, parent=ctx.parent or "baseline",
        features=", ".join(ctx.features) or "none", idea=ctx.idea.strip() or "(none given)", timing=timing,
        roofline=ctx.roofline.strip() or "(not computed)", compile_report=compile_report,
        diagnosis=ctx.diagnosis.render(),
    )
    return [SystemMessage(content=render("critic_system")), HumanMessage(content=user)]


def critique(model: Any, ctx: CriticContext, fallback: Critique, *, retries: int = 2) -> tuple[Critique, bool, TokenUsage]:
    """(critique, used_fallback, usage). Never raises for LLM failures: the fallback stands in.

    next_features keeps only ids of ctx.catalogue; if none is left, the fallback's are used.
    """
    allowed = [f.id for f in ctx.catalogue]
    try:
        answer = invoke_structured(model, build_critic_messages(ctx), Critique, retries=retries)
    except LLMError as exc:
        usage = getattr(exc, "usage", None) or TokenUsage()
        return fallback, True, usage
    value = answer.value
    kept = [f for f in dict.fromkeys(value.next_features) if f in allowed]
    if not kept:
        kept = [f for f in fallback.next_features if f in allowed]
    return value.model_copy(update={"next_features": kept}), False, answer.usage
