"""The graph's nodes: setup, plan, code (fanned out), the tool stages, select, critique, repair, finalize.

Each node reads the small state, does its work through ``Deps`` (models, evaluator, run directory),
writes what is large to the run directory, and returns a small update. Every node is traced
(start/end/duration) and every decision is an event in trace.jsonl.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from langgraph.types import Send

from cuda_llm.agents.context import BestKernel, FeatureBrief, HistoryItem, TaskBrief, make_diff
from cuda_llm.agents.errors import LLMAnswerError
from cuda_llm.agents.usage import total_tokens
from cuda_llm.graph import stop_rules
from cuda_llm.graph.deps import Deps
from cuda_llm.graph.selection import decide, interval
from cuda_llm.graph.stages import PASSED, StageContext, ToolStage, load_profile
from cuda_llm.graph.state import (
    MAX_HISTORY, BestSummary, Candidate, GraphState, Limits, RESET, candidate_id, round_cands, short,
)
from cuda_llm.results import EvalResult, Status
from cuda_llm.tools import failure_text

REPAIRABLE = {Status.compile_error.value, Status.wrong_answer.value, Status.runtime_error.value,
              Status.static_error.value, Status.timeout.value}
TOP_FEATURES_OFFERED = 10


def _usage(u: Any) -> dict[str, int]:
    if u is None:
        return {"input": 0, "output": 0, "calls": 0}
    return {"input": int(u.input_tokens), "output": int(u.output_tokens), "calls": int(u.calls)}


def _limits(state: GraphState) -> Limits:
    return Limits(**state.get("limits", {}))


def _budget(lim: Limits) -> stop_rules.Budget:
    return stop_rules.Budget(max_rounds=lim.max_rounds, time_budget_s=lim.time_budget_s, token_budget=lim.token_budget,
                             plateau_rounds=lim.plateau_rounds, reserve_s=lim.reserve_s)


def _brief(deps: Deps) -> TaskBrief:
    return TaskBrief.from_task(deps.task)


def _best_kernel(deps: Deps, state: GraphState, *, with_profile: bool = True) -> BestKernel:
    """The kernel to improve on, as the prompts show it (source read back by hash)."""
    best = BestSummary(**state.get("best", {}))
    base_ms = (state.get("baseline") or {}).get("ms")
    source = deps.source(best.hash) if best.hash else ""
    resources: list[Any] = []
    try:
        res = deps.rundir.read_result(best.id) if best.id != "baseline" else None
        if res is not None and res.compile is not None:
            resources = list(res.compile.kernels)
    except Exception:  # noqa: BLE001
        pass
    diagnosis = ""
    prof = load_profile(deps.rundir, best.id) if with_profile else None
    if prof:
        d = prof.get("diagnosis") or {}
        diagnosis = f"{d.get('bottleneck', '')}: {d.get('summary', '')}"
    return BestKernel(candidate=best.id, source=source, median_ms=best.ms,
                      speedup=(base_ms / best.ms) if (base_ms and best.ms) else None,
                      resources=resources, profile=best.profile, diagnosis=diagnosis, features=best.features)


def _history(deps: Deps, state: GraphState) -> list[HistoryItem]:
    """The latest attempts, read from the per-round summaries on disk (kept out of the checkpoint)."""
    items: list[HistoryItem] = []
    for r in range(int(state.get("round", 0)), 0, -1):
        p = Path(deps.rundir.root) / "rounds" / f"r{r}" / "history.json"
        if p.is_file():
            items = [HistoryItem(**h) for h in json.loads(p.read_text())] + items
        if len(items) >= MAX_HISTORY:
            break
    return items[-MAX_HISTORY:]


def _result(deps: Deps, c: Candidate) -> EvalResult | None:
    """A candidate's stored result (the run directory's copy, else the evaluation cache by source hash)."""
    res = deps.rundir.read_result(c.id)
    if res is None and c.hash:
        res = deps.evaluator.stored("eval", c.hash)
    return res


def _feature_briefs(deps: Deps, ids: list[str]) -> list[FeatureBrief]:
    idx = {f.id: f for f in deps.catalogue}
    return [FeatureBrief.from_feature(idx[i]) for i in ids if i in idx]


def _context_path(deps: Deps, round_: int) -> str:
    return f"rounds/r{round_}/coder_context.json"


def _write_coder_context(deps: Deps, state: GraphState, round_: int) -> None:
    """What every coder of the round is shown besides its own job: on disk, not in the Send payloads."""
    data = {"best": _best_kernel(deps, state).model_dump(mode="json"),
            "history": [h.model_dump(mode="json") for h in _history(deps, state)]}
    deps.rundir.write_text(_context_path(deps, round_), json.dumps(data))


def _read_coder_context(deps: Deps, round_: int) -> tuple[BestKernel | None, list[HistoryItem]]:
    p = Path(deps.rundir.root) / _context_path(deps, round_)
    data = json.loads(p.read_text())
    return BestKernel(**data["best"]), [HistoryItem(**h) for h in data["history"]]


# ---------------------------------------------------------------- setup
def make_setup(deps: Deps) -> Callable[[GraphState], dict]:
    def setup(state: GraphState) -> dict:
        with deps.tracer.node("setup"):
            naive = Path(deps.task.baseline_path).read_text()
            h = deps.put_source(naive)
            got = deps.evaluator.baseline(deps.loaded)
            res: EvalResult = got.value
            deps.rundir.write_result("baseline", res)
            base: dict[str, Any] = {"status": res.status.value, "note": short(res.message),
                                     "label": deps.task.baseline_label, "library_label": deps.task.library_label,
                                     "library_ms": res.library_ms}
            best = BestSummary(id="baseline", hash=h)
            # a PyTorch task's baseline is eager, not a kernel: the first passing kernel becomes the best
            # whatever its speed, and its speedup over eager is what the run reports
            kernel_baseline = getattr(deps.task, "torch", None) is None
            if res.timing is not None:
                lo, hi = interval(res.timing)
                base.update(ms=res.timing.median_ms, lo=lo, hi=hi)
                if kernel_baseline:
                    best = best.model_copy(update={"ms": res.timing.median_ms, "lo": lo, "hi": hi})
            deps.event("baseline", status=res.status.value, median_ms=base.get("ms"), cached=not got.fresh,
                       note=base["note"])
            deps.progress_call("baseline", base.get("ms"))
            return {"baseline": base, "best": best.model_dump(), "round": 0,
                    "plateau_ref_ms": base.get("ms") if kernel_baseline else None,
                    "plateau_count": 0, "critique": {}, "evaluations": 0, "stop_reason": None,
                    "elapsed_s": deps.elapsed(), "last_round_s": 0.0}
    return setup


# ---------------------------------------------------------------- plan
def make_plan(deps: Deps) -> Callable[[GraphState], dict]:
    from cuda_llm.agents.planner import CandidatePlan, OfferedFeature, PlannerContext, plan_round

    def plan(state: GraphState) -> dict:
        lim = _limits(state)
        round_ = int(state.get("round", 0)) + 1
        with deps.tracer.node("plan", round=round_):
            ranked = _rank(deps, round_)
            offered = [OfferedFeature.from_ranked(r) for r in ranked]
            crit = state.get("critique") or {}
            crit_text = crit.get("summary", "")
            if crit.get("next_features"):
                crit_text += "\nSuggested next features: " + ", ".join(crit["next_features"])
            ctx = PlannerContext(task=_brief(deps), device=deps.device, n_candidates=lim.n_candidates, round_index=round_,
                                 offered=offered, best=_best_kernel(deps, state), critique=crit_text,
                                 history=_history(deps, state))
            tokens: dict[str, dict] = {}
            try:
                plan_, answer = plan_round(deps.models["planner"], ctx)
                tokens["planner"] = _usage(answer.usage)
                cands = plan_.candidates
                source = "planner"
                if plan_.adjustments:
                    deps.event("decision", kind="plan_adjusted", round=round_, adjustments=plan_.adjustments[:6])
            except LLMAnswerError as exc:
                tokens["planner"] = _usage(exc.usage)
                from cuda_llm.feature_db.bandit import assign_features

                sets = assign_features(ranked, lim.n_candidates, lim.features_per_candidate, seed=round_)
                cands = [CandidatePlan(features=s, idea="") for s in sets]
                source = "bandit (planner answer unusable)"
                deps.event("warning", where="planner", error=short(str(exc), 300))
            best = BestSummary(**state.get("best", {}))
            jobs = []
            for slot, cp in enumerate(cands):
                jobs.append({"cid": candidate_id(round_, slot), "round": round_, "slot": slot, "attempt": 0,
                             "features": list(cp.features), "idea": short(cp.idea, 240), "parent": best.id,
                             "parent_ms": best.ms})
            deps.event("decision", kind="features", round=round_, by=source,
                       candidates={j["cid"]: j["features"] for j in jobs})
            _write_coder_context(deps, state, round_)
            deps.progress_call("round_start", round_, [j["features"] for j in jobs])
            return {"round": round_, "jobs": jobs, "cands": {RESET: True}, "repair_attempt": 0, "round_done": False,
                    "round_started_s": deps.elapsed(), "elapsed_s": deps.elapsed(), "tokens": tokens}
    return plan


def _rank(deps: Deps, round_: int) -> list[Any]:
    from cuda_llm.feature_db.bandit import rank_features, task_filters

    stats = deps.stats if deps.stats is not None else []
    # family, bound, tolerance and input dtypes decide what applies (no reduced precision on a 1e-4 task)
    filters = task_filters(deps.task)
    try:
        return rank_features(deps.catalogue, stats, arch=deps.arch, task_tags=list(deps.task.tags), seed=round_,
                             top=TOP_FEATURES_OFFERED, **filters)
    except Exception as exc:  # noqa: BLE001 - a broken statistics file must not stop the run
        deps.event("warning", where="rank_features", error=short(str(exc), 300))
        return rank_features(deps.catalogue, [], arch=deps.arch, seed=round_, top=TOP_FEATURES_OFFERED, **filters)


def route_jobs(state: GraphState) -> list[Send]:
    """Fan out: one ``code`` task per job (the Send payload is the small job dict only)."""
    return [Send("code", job) for job in state.get("jobs") or []]


# ---------------------------------------------------------------- code (one candidate)
def make_code(deps: Deps) -> Callable[[dict], dict]:
    from cuda_llm.agents.coder import CoderContext, RepairInfo, write_kernel

    def code(job: dict) -> dict:
        cid = job["cid"]
        with deps.tracer.node("code", candidate=cid, round=job["round"], attempt=job.get("attempt", 0)):
            best, history = _read_coder_context(deps, job["round"])
            repair = None
            if job.get("repair_of"):
                repair = RepairInfo(failed_source=deps.source(job["failed_hash"]), errors=job.get("errors", ""))
            ctx = CoderContext(task=_brief(deps), device=deps.device, candidate=cid,
                               features=_feature_briefs(deps, job["features"]), idea=job.get("idea", ""),
                               best=best, history=history, repair=repair)
            cand = Candidate(id=cid, round=job["round"], slot=job["slot"], attempt=job.get("attempt", 0),
                             parent=job.get("parent", "baseline"), parent_ms=job.get("parent_ms"),
                             features=job["features"], repair_of=job.get("repair_of"))
            try:
                answer = write_kernel(deps.models["coder"], ctx)
            except LLMAnswerError as exc:
                deps.event("candidate", candidate=cid, status="no_code", note=short(str(exc), 300))
                cand = cand.model_copy(update={"status": "no_code", "note": short(str(exc))})
                return {"cands": {cid: cand.model_dump(exclude_defaults=True)}, "tokens": {"coder": _usage(exc.usage)}}
            h = deps.put_source(answer.source)
            path = deps.rundir.write_candidate(cid, answer.source)
            compiled = _precompile(deps, answer.source) if deps.precompile else None
            deps.event("candidate", candidate=cid, source_hash=h, path=str(path), features=job["features"],
                       parent=cand.parent, repair_of=cand.repair_of, coder_attempts=answer.attempts, compiled=compiled)
            cand = cand.model_copy(update={"hash": h})
            return {"cands": {cid: cand.model_dump(exclude_defaults=True)}, "tokens": {"coder": _usage(answer.usage)}}
    return code


def _precompile(deps: Deps, source: str) -> bool | None:
    """Compile on this (coder) thread so compiles run in parallel; evaluation then hits the compile cache."""
    try:
        from cuda_llm.tools.compile import compile_source

        return compile_source(source, arch=deps.arch).ok
    except Exception:  # noqa: BLE001 - evaluation compiles (and reports) again anyway
        return None


# ---------------------------------------------------------------- tool stages
def make_stage(deps: Deps, stage: ToolStage) -> Callable[[GraphState], dict]:
    def run_stage(state: GraphState) -> dict:
        with deps.tracer.node(stage.name, round=state.get("round")):
            update = stage.run(StageContext(state, deps)) or {}
        return {**update, "elapsed_s": deps.elapsed()}
    run_stage.__name__ = f"stage_{stage.name}"
    return run_stage


# ---------------------------------------------------------------- select
def make_select(deps: Deps) -> Callable[[GraphState], dict]:
    def select(state: GraphState) -> dict:
        with deps.tracer.node("select", round=state.get("round")):
            best = BestSummary(**state.get("best", {}))
            best_iv = (best.lo, best.hi) if best.lo is not None and best.hi is not None else None
            passing = [c for c in round_cands(state) if c.status == Status.ok.value and c.ms is not None]
            update: dict[str, Any] = {"elapsed_s": deps.elapsed()}
            if not passing:
                deps.event("decision", kind="selection", round=state.get("round"), replaced=False,
                           why="no candidate of this round passed")
                return update
            c = min(passing, key=lambda x: x.ms)
            res = _result(deps, c)
            if res is None:
                deps.event("warning", where="select", error=f"no stored result for {c.id}")
                return update
            ok, why = decide(res, best_iv)
            confirm_iv = None
            if ok:
                got = deps.evaluator.evaluate(deps.loaded, deps.source(c.hash), f"{c.id}-confirm",
                                              Path(deps.rundir.root) / "work" / f"{c.id}-confirm", kind="confirm")
                confirm = got.value
                deps.rundir.write_result(f"{c.id}-confirm", confirm)
                deps.event("evaluation", candidate=f"{c.id}-confirm", round=c.round, status=confirm.status.value,
                           cached=not got.fresh, median_ms=confirm.median_ms, purpose="confirm")
                ok, why = decide(res, best_iv, confirm)
                if confirm.timing is not None:
                    confirm_iv = interval(confirm.timing)
                update["evaluations"] = int(state.get("evaluations", 0)) + 1
            deps.event("decision", kind="selection", round=state.get("round"), candidate=c.id, replaced=ok, why=why,
                       best_before=best.id, best_before_ms=best.ms, candidate_ms=c.ms)
            if ok:
                lo = min(c.lo, confirm_iv[0]) if confirm_iv else c.lo
                hi = max(c.hi, confirm_iv[1]) if confirm_iv else c.hi
                new = BestSummary(id=c.id, round=c.round, hash=c.hash, ms=c.ms, lo=lo, hi=hi, features=c.features,
                                  profile=c.profile, bottleneck=c.bottleneck)
                update["best"] = new.model_dump()
                deps.rundir.write_text("best_so_far.cu", deps.source(c.hash))
            return update
    return select


# ---------------------------------------------------------------- critique
def make_critique(deps: Deps) -> Callable[[GraphState], dict]:
    from cuda_llm.agents.critic import CriticContext, DiagnosisBrief, critique, critique_from_diagnosis

    def critique_node(state: GraphState) -> dict:
        lim = _limits(state)
        round_ = int(state.get("round", 0))
        cands = round_cands(state)
        update: dict[str, Any] = {}
        with deps.tracer.node("critique", round=round_):
            passing = [c for c in cands if c.status == Status.ok.value and c.ms is not None]
            if passing:
                c = min(passing, key=lambda x: x.ms)
                crit, used_fallback, usage = _critique_one(deps, state, c, CriticContext, DiagnosisBrief, critique,
                                                           critique_from_diagnosis)
                update["tokens"] = {"critic": _usage(usage)}
                update["critique"] = {"candidate": c.id, "bottleneck": crit.bottleneck,
                                      "summary": short(crit.summary, 240), "next_features": crit.next_features[:6]}
                deps.event("decision", kind="critique", round=round_, candidate=c.id, bottleneck=crit.bottleneck,
                           next_features=crit.next_features, rule_based=used_fallback, summary=short(crit.summary, 300))
            # the round ends unless nothing passed and a repair is still allowed
            passed_any = any(c.status in PASSED for c in cands)
            latest = max((c.attempt for c in cands), default=0)
            repairable = [c for c in cands if c.attempt == latest and c.status in REPAIRABLE and c.hash]
            attempt = int(state.get("repair_attempt", 0))
            tokens_now = total_tokens(state.get("tokens")) + sum(update.get("tokens", {}).get("critic", {}).get(k, 0)
                                                                  for k in ("input", "output"))
            elapsed = deps.elapsed()
            budget = _budget(lim)
            if not passed_any and repairable and attempt < lim.max_repairs:
                reason = stop_rules.hard_stop(elapsed_s=elapsed, tokens=tokens_now, budget=budget)
                if reason is None:
                    deps.event("decision", kind="repair", round=round_, attempt=attempt + 1,
                               candidates=[c.id for c in repairable])
                    update.update(round_done=False, elapsed_s=elapsed)
                    return update
                update.update(_end_round(deps, state, cands, elapsed))
                update["stop_reason"] = reason
            else:
                update.update(_end_round(deps, state, cands, elapsed))
                reason = stop_rules.stop_after_round(
                    round_=round_, plateau_count=update["plateau_count"], elapsed_s=elapsed, tokens=tokens_now,
                    budget=budget, last_round_s=update["last_round_s"])
                update["stop_reason"] = reason
            best = BestSummary(**state.get("best", {}))
            base_ms = (state.get("baseline") or {}).get("ms")
            deps.event("round_end", round=round_, best=best.id, best_ms=best.ms,
                       speedup=(base_ms / best.ms) if base_ms and best.ms else None,
                       passed=sum(c.status in PASSED for c in cands), candidates=len(cands),
                       plateau_count=update["plateau_count"], tokens=tokens_now, elapsed_s=elapsed,
                       stop_reason=update.get("stop_reason"))
            deps.progress_call("round_end", round_, best.ms, (base_ms / best.ms) if base_ms and best.ms else None,
                               sum(c.status in PASSED for c in cands), len(cands))
            if update.get("stop_reason"):
                deps.event("decision", kind="stop", reason=update["stop_reason"],
                           text=stop_rules.REASON_TEXT.get(update["stop_reason"], ""))
            update["elapsed_s"] = elapsed
            return update
    return critique_node


def _end_round(deps: Deps, state: GraphState, cands: list[Candidate], elapsed: float) -> dict[str, Any]:
    lim = _limits(state)
    best = BestSummary(**state.get("best", {}))
    base_ms = (state.get("baseline") or {}).get("ms")
    ref, count = stop_rules.update_plateau(state.get("plateau_ref_ms"), int(state.get("plateau_count", 0)), best.ms,
                                           lim.plateau_threshold)
    history = [HistoryItem(candidate=c.id, round=c.round, features=c.features, status=c.status or "not_run",
                           median_ms=c.ms, speedup=(base_ms / c.ms) if base_ms and c.ms else None,
                           note=short(c.note, 160)).model_dump(mode="json", exclude_defaults=True) for c in cands]
    deps.rundir.write_text(f"rounds/r{state.get('round', 0)}/history.json", json.dumps(history, indent=1))
    deps.rundir.write_text(f"rounds/r{state.get('round', 0)}/candidates.json",
                           json.dumps([c.model_dump(mode="json") for c in cands], indent=1))
    return {"plateau_ref_ms": ref, "plateau_count": count, "round_done": True,
            "last_round_s": round(elapsed - float(state.get("round_started_s", elapsed)), 3)}


def _critique_one(deps: Deps, state: GraphState, c: Candidate, CriticContext: Any, DiagnosisBrief: Any,
                  critique: Any, critique_from_diagnosis: Any) -> tuple[Any, bool, Any]:
    from cuda_llm.feature_db.catalogue import supports

    res = _result(deps, c)
    prof = load_profile(deps.rundir, c.id) or {}
    diag = DiagnosisBrief(**{k: v for k, v in (prof.get("diagnosis") or {}).items()
                             if k in ("bottleneck", "evidence", "suggested_features", "summary")})
    catalogue = [f for f in deps.catalogue if _safe_supports(supports, f, deps.arch)]
    briefs = [FeatureBrief.from_feature(f) for f in catalogue]
    base_ms = (state.get("baseline") or {}).get("ms")
    parent_src = None
    best = BestSummary(**state.get("best", {}))
    if best.hash:
        parent_src = deps.source(best.hash)
    roof = prof.get("roofline") or {}
    profile = prof.get("profile") or {}
    ctx = CriticContext(
        task=_brief(deps), device=deps.device, candidate=c.id, features=c.features, median_ms=c.ms,
        speedup=(base_ms / c.ms) if base_ms and c.ms else None, status=c.status or "ok",
        roofline=_roofline_text(roof), metrics=c.profile if profile.get("available") else "",
        profile_unavailable_reason=str(profile.get("reason") or ""),
        resources=list(res.compile.kernels) if res is not None and res.compile else [],
        compile_warnings=list(res.compile.warnings) if res is not None and res.compile else [],
        diff=make_diff(parent_src, deps.source(c.hash), parent=best.id, child=c.id),
        diagnosis=diag, catalogue=briefs)
    fallback = critique_from_diagnosis(diag, [b.id for b in briefs])
    return critique(deps.models["critic"], ctx, fallback)


def _safe_supports(supports: Any, f: Any, arch: str) -> bool:
    try:
        return bool(supports(f, arch))
    except Exception:  # noqa: BLE001
        return True


def _roofline_text(roof: dict[str, Any]) -> str:
    if not roof:
        return ""
    parts = [f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}" for k, v in roof.items() if v is not None]
    return "; ".join(parts[:10])


def route_after_critique(state: GraphState) -> str:
    if state.get("stop_reason"):
        return "finalize"
    if not state.get("round_done", True):
        return "repair"
    return "plan"


# ---------------------------------------------------------------- repair
def make_repair(deps: Deps) -> Callable[[GraphState], dict]:
    def repair(state: GraphState) -> dict:
        lim = _limits(state)
        attempt = int(state.get("repair_attempt", 0)) + 1
        round_ = int(state.get("round", 0))
        with deps.tracer.node("repair", round=round_, attempt=attempt):
            cands = round_cands(state)
            latest = max((c.attempt for c in cands), default=0)
            failed = [c for c in cands if c.attempt == latest and c.status in REPAIRABLE and c.hash][: lim.n_candidates]
            jobs = []
            for c in failed:
                res = _result(deps, c)
                jobs.append({"cid": candidate_id(round_, c.slot, attempt), "round": round_, "slot": c.slot,
                             "attempt": attempt, "features": c.features, "idea": "", "parent": c.parent,
                             "parent_ms": c.parent_ms, "repair_of": c.id, "failed_hash": c.hash,
                             "errors": repair_errors(res)})
            deps.event("decision", kind="repair_jobs", round=round_, attempt=attempt,
                       candidates={j["cid"]: j["repair_of"] for j in jobs})
            return {"repair_attempt": attempt, "jobs": jobs, "elapsed_s": deps.elapsed()}
    return repair


def repair_errors(res: EvalResult | None, limit: int = 3000) -> str:
    """What the coder is told about a failure (the one failure formatter, full detail, held-out redacted)."""
    if res is None:
        return "the evaluation result is missing; check the kernel against the contract and rewrite it carefully"
    return failure_text.describe(res, full=True)[:limit]


# ---------------------------------------------------------------- finalize
def make_finalize(deps: Deps) -> Callable[[GraphState], dict]:
    def finalize(state: GraphState) -> dict:
        with deps.tracer.node("finalize"):
            best = BestSummary(**state.get("best", {}))
            source = deps.source(best.hash)
            got = deps.evaluator.final_check(deps.loaded, source, best.id, Path(deps.rundir.root) / "work" / "final")
            cand, base = got.value
            deps.rundir.write_result("final", cand)
            deps.rundir.write_result("final-baseline", base)
            Path(deps.rundir.best_path).write_text(source)
            final = {"candidate": best.id, "status": cand.status.value, "ms": cand.median_ms,
                     "baseline_status": base.status.value, "baseline_ms": base.median_ms,
                     "speedup": (base.median_ms / cand.median_ms) if base.median_ms and cand.median_ms else None,
                     "pct_of_sol": cand.timing.pct_of_sol if cand.timing is not None else None,
                     "note": short(cand.message), "best_path": str(deps.rundir.best_path)}
            deps.event("final", **final, stop_reason=state.get("stop_reason"), cached=not got.fresh)
            return {"final": final, "elapsed_s": deps.elapsed()}
    return finalize
