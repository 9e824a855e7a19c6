"""The critic: reads the measured evidence and says what limits the kernel and which features to try next.

The rule-based diagnosis is always in its prompt, and stands in (as the caller's ``fallback``) when the
LLM fails for any reason, so a round never stops for want of a critique.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from cuda_llm.agents.context import FeatureBrief, TaskBrief, render_device
from cuda_llm.agents.errors import LLMError
from cuda_llm.agents.prompts import render
from cuda_llm.agents.structured import invoke_structured
from cuda_llm.agents.usage import TokenUsage
from cuda_llm.results import DeviceInfo, KernelResources

Bottleneck = Literal["memory-bound", "compute-bound", "latency-bound", "occupancy-bound", "launch-bound",
                     "divergence", "bank-conflicts", "unknown"]


class DiagnosisBrief(BaseModel):
    """The rule-based diagnosis (cuda_llm.tools.diagnosis.Diagnosis) as given to the critic."""

    bottleneck: str = "unknown"
    evidence: list[str] = Field(default_factory=list)
    suggested_features: list[str] = Field(default_factory=list)
    summary: str = ""

    @classmethod
    def from_diagnosis(cls, diagnosis: Any) -> "DiagnosisBrief":
        return cls(bottleneck=str(getattr(diagnosis, "bottleneck", "unknown")),
                   evidence=list(getattr(diagnosis, "evidence", []) or []),
                   suggested_features=list(getattr(diagnosis, "suggested_features", []) or []),
                   summary=str(getattr(diagnosis, "summary", "") or ""))

    def render(self) -> str:
        lines = [f"bottleneck: {self.bottleneck}"] + [f"- {e}" for e in self.evidence]
        if self.suggested_features:
            lines.append("suggested features: " + ", ".join(self.suggested_features))
        if self.summary:
            lines.append(self.summary)
        return "\n".join(lines)


class Critique(BaseModel):
    bottleneck: Bottleneck
    evidence: list[str]
    next_features: list[str]
    expected_gain: str
    summary: str


class CriticContext(BaseModel):
    task: TaskBrief
    device: DeviceInfo | None = None
    candidate: str
    features: list[str] = Field(default_factory=list)  # what it was asked to apply
    median_ms: float | None = None
    speedup: float | None = None
    status: str = "ok"
    roofline: str = ""  # arithmetic intensity, attainable ms, % of SOL, limiter
    metrics: str = ""  # condensed Nsight Compute metrics; empty when profiling was unavailable
    profile_unavailable_reason: str = ""
    resources: list[KernelResources] = Field(default_factory=list)
    compile_warnings: list[str] = Field(default_factory=list)
    diff: str = ""  # make_diff(parent_source, source)
    diagnosis: DiagnosisBrief  # always given
    catalogue: list[FeatureBrief]


def critique_from_diagnosis(diagnosis: Any, catalogue_ids: list[str] | None = None) -> Critique:
    """The fallback critique built from the rule-based diagnosis."""
    d = diagnosis if isinstance(diagnosis, DiagnosisBrief) else DiagnosisBrief.from_diagnosis(diagnosis)
    feats = [f for f in d.suggested_features if catalogue_ids is None or f in catalogue_ids]
    bottleneck = d.bottleneck if d.bottleneck in Bottleneck.__args__ else "unknown"
    return Critique(bottleneck=bottleneck, evidence=d.evidence, next_features=feats,
                    expected_gain="unknown (rule-based diagnosis)", summary=d.summary or f"rule-based: {bottleneck}")


def build_critic_messages(ctx: CriticContext) -> list[BaseMessage]:
    from cuda_llm.agents.context import render_resources

    timing = ctx.status
    if ctx.median_ms is not None:
        timing += f", {ctx.median_ms:.4f} ms"
    if ctx.speedup is not None:
        timing += f", {ctx.speedup:.2f}x the naive baseline"
    compile_report = render_resources(ctx.resources)
    if ctx.compile_warnings:
        compile_report += "\nWarnings:\n" + "\n".join(f"- {w}" for w in ctx.compile_warnings[:10])
    metrics = ctx.metrics.strip() or f"(not profiled: {ctx.profile_unavailable_reason or 'unavailable'})"
    user = render(
        "critic_user", task=ctx.task.render(), device=render_device(ctx.device), candidate=ctx.candidate,
        features=", ".join(ctx.features) or "none", timing=timing, roofline=ctx.roofline.strip() or "(not computed)",
        metrics=metrics, compile_report=compile_report, diff=ctx.diff.strip() or "(none)",
        diagnosis=ctx.diagnosis.render(),
        catalogue="\n".join(f"- {f.id}: {f.name} — {f.bottleneck}" for f in ctx.catalogue) or "(empty)",
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
