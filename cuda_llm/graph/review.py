"""Reviewing a measured kernel: Nsight Compute and the rule diagnosis through the Evaluator seam, then the
critic (an LLM, a person through the manual provider, or the rules). Used for the naive baseline during
set-up, so round 1 starts with a diagnosis and a critique, and for each round's fastest candidate.

The whole critique is kept in critiques/<cid>.json: it is what the planner and every coder that starts from
that kernel are shown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cuda_llm.agents.context import CritiqueBrief, DiagnosisBrief, FeatureBrief, make_diff
from cuda_llm.agents.usage import TokenUsage
from cuda_llm.graph import evidence
from cuda_llm.graph.stage_inputs import applicable_feature_ids
from cuda_llm.graph.state import Candidate, short
from cuda_llm.results import EvalResult
from cuda_llm.runs.llm_cache import call_label
from cuda_llm.agents.critic import CriticContext, brief_of, critique, critique_from_diagnosis


def profile_and_diagnose(deps: Any, cid: str, source: str, res: EvalResult) -> dict[str, Any]:
    """Profile a passing kernel and diagnose it (through the seam); the record is kept in profiles/<cid>.json."""
    work = Path(deps.rundir.root) / "work" / cid
    work.mkdir(parents=True, exist_ok=True)
    got = deps.evaluator.profile_cached(deps.loaded, source, cid, work, res)
    prof = got.value
    analysis = deps.evaluator.analyze(deps.loaded, res, prof, applicable_feature_ids(deps))
    roof, diag = analysis.roofline, analysis.diagnosis
    record = {"profile": prof.model_dump(mode="json"), "roofline": roof.model_dump(mode="json") if roof else None,
              "diagnosis": diag.model_dump(mode="json"), "candidate": cid}
    deps.rundir.write_text(f"profiles/{cid}.json", json.dumps(record, indent=1))
    deps.event("profile", candidate=cid, available=prof.available, summary=short(prof.summary(), 300),
               bottleneck=diag.bottleneck, suggested=diag.suggested_features, cached=not got.fresh)
    return record


def _build_lines(res: EvalResult | None) -> dict[str, list[str]]:
    """The ptxas messages that cost speed and the SASS summary of the judged build (evidence.build_lines)."""
    lines = evidence.build_lines(res.compile if res is not None else None)
    return {"build_notes": lines["build_notes"], "sass": lines["sass"]}


def _critic_context(deps: Any, c: Candidate, round_: int, current: list[Candidate]) -> Any:
    res = deps.rundir.read_result(c.id)
    rec = evidence.load_profile(deps, c.id)
    summary, lines, note = evidence.profile_of(deps, c.id)
    diag = DiagnosisBrief.from_diagnosis(rec.get("diagnosis") or {})
    base_ms = evidence.baseline_ms(deps)
    source = evidence.candidate_source(deps, c.id) or (deps.source(c.hash) if c.hash else "")
    parent_src = evidence.candidate_source(deps, c.parent) if c.id != evidence.BASELINE else None
    diff = make_diff(parent_src, source, parent=c.parent, child=c.id) if parent_src is not None else \
        "(no parent: this is the task's naive baseline)"
    return CriticContext(
        task=evidence.task_brief(deps), device=deps.device, build=evidence.build_brief(deps), candidate=c.id,
        parent=c.parent if c.id != evidence.BASELINE else "", features=c.features,
        idea=evidence.idea_of(deps, c.round, c.slot) if c.round else "",
        median_ms=c.ms, speedup=(base_ms / c.ms) if base_ms and c.ms else None,
        baseline_label=deps.task.baseline_label,
        speedup_over_parent=(c.parent_ms / c.ms) if c.parent_ms and c.ms else None, status=c.status or "ok",
        roofline=evidence.roofline_text(rec.get("roofline")),
        metrics="\n".join(([summary] if summary else []) + [f"- {x}" for x in lines]),
        profile_unavailable_reason=note,
        resources=list(res.compile.kernels) if res is not None and res.compile else [],
        compile_warnings=list(res.compile.warnings) if res is not None and res.compile else [],
        **_build_lines(res),
        source=source, diff=diff, diagnosis=diag,
        catalogue=[FeatureBrief.from_feature(f) for f in evidence.task_catalogue(deps)],
        history=evidence.history(deps, round_, [x for x in current if x.id != c.id]),
        budget_chars=deps.prompt_budget("critic"))


def review(deps: Any, c: Candidate, round_: int, current: list[Candidate] = ()) -> tuple[CritiqueBrief, TokenUsage]:
    """The critique of ``c`` (saved to critiques/<cid>.json) and the tokens it cost."""
    ctx = _critic_context(deps, c, round_, list(current))
    fallback = critique_from_diagnosis(ctx.diagnosis, [f.id for f in ctx.catalogue])
    model = deps.models.get("critic")
    if model is None:      # the critic is played by the rules
        crit, by, usage = fallback, "rules", TokenUsage()
    else:
        with call_label(c.id):
            crit, used_fallback, usage = critique(model, ctx, fallback)
        by = "rules" if used_fallback else "critic"
    brief = brief_of(crit, c.id, by=by)
    evidence.save_critique(deps, brief)
    deps.event("decision", kind="critique", round=round_, candidate=c.id, bottleneck=crit.bottleneck,
               next_features=crit.next_features, rule_based=by == "rules", summary=short(crit.summary, 300),
               change=short(crit.change, 300))
    return brief, usage


def state_critique(brief: CritiqueBrief) -> dict[str, Any]:
    """What the checkpointed state keeps of a critique (the whole one is in critiques/<cid>.json)."""
    return {"candidate": brief.candidate, "bottleneck": brief.bottleneck, "summary": short(brief.summary, 240),
            "next_features": brief.next_features[:6], "by": brief.by}


def review_baseline(deps: Any, res: EvalResult, source: str) -> dict[str, Any]:
    """Set-up's review of the naive baseline (profile, diagnosis, critique): a state update."""
    if not res.status.passed or res.timing is None:
        return {}
    profile_and_diagnose(deps, evidence.BASELINE, source, res)
    base = Candidate(id=evidence.BASELINE, round=0, slot=0, parent="", hash=None, status=res.status.value,
                     ms=res.timing.median_ms)
    brief, usage = review(deps, base, 1)
    return {"critique": state_critique(brief),
            "tokens": {"critic": {"input": usage.input_tokens, "output": usage.output_tokens, "calls": usage.calls}}}
