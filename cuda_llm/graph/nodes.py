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

from cuda_llm.agents.errors import LLMAnswerError
from cuda_llm.agents.usage import total_tokens
from cuda_llm.graph import coding, evidence, planning, refine, review, search, stop_rules
from cuda_llm import halts
from cuda_llm.graph.deps import Deps
from cuda_llm.graph.selection import (CROSS_GPU_SPREAD, DECISIVE_RATIO, decide, decisive, head_to_head_decision,
                                      interval, is_win, worth_a_head_to_head)
from cuda_llm.graph.stages import PASSED, StageContext, ToolStage
from cuda_llm.graph.state import BestSummary, Candidate, GraphState, Limits, RESET, round_cands, short
from cuda_llm.results import CHALLENGER, EvalResult, Status
from cuda_llm.runs.llm_cache import call_label
from cuda_llm.tools.harness import failure_text
from cuda_llm.agents.coder import write_kernel
from cuda_llm.agents.planner import CandidatePlan, PlannerContext, plan_round

REPAIRABLE = coding.REPAIRABLE


def _usage(u: Any) -> dict[str, int]:
    if u is None:
        return {"input": 0, "output": 0, "calls": 0}
    return {"input": int(u.input_tokens), "output": int(u.output_tokens), "calls": int(u.calls)}


def _limits(state: GraphState) -> Limits:
    return Limits(**state.get("limits", {}))


def _result(deps: Deps, c: Candidate) -> EvalResult | None:
    """A candidate's stored result (the run directory's copy, else the evaluation cache by source hash)."""
    res = deps.rundir.read_result(c.id)
    if res is None and c.hash:
        res = deps.evaluator.stored("eval", c.hash)
    return res


# ---------------------------------------------------------------- setup
def make_setup(deps: Deps) -> Callable[[GraphState], dict]:
    def setup(state: GraphState) -> dict:
        with deps.tracer.node("setup"):
            naive = Path(deps.task.baseline_path).read_text()
            h = deps.put_source(naive)
            got = deps.evaluator.baseline_cached(deps.loaded)
            res: EvalResult = got.value
            deps.rundir.write_result("baseline", res)
            if not res.status.passed:   # nothing to compare with: stop before any LLM call
                deps.event("baseline", status=res.status.value, median_ms=None, cached=not got.fresh,
                           note=short(failure_text.note(res), 300), label=deps.task.baseline_label)
                raise baseline_halt(deps, res)
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
                    best = best.model_copy(update={"ms": res.timing.median_ms, "lo": lo, "hi": hi,
                                                   "pct_sol": res.timing.pct_of_sol})
                    search.record_baseline(deps, state, h, res, lo, hi)
            deps.event("baseline", status=res.status.value, median_ms=base.get("ms"), cached=not got.fresh,
                       note=base["note"], label=base["label"])
            deps.progress_call("baseline", base.get("ms"), base["label"])
            lib = _library(deps)
            if lib is not None:
                base["library_ms"] = lib
            if state.get("seed"):
                best = _seed(deps, state) or best
            stop = _stop_at_setup(deps, state, best)
            # round 1 starts with a diagnosis and a critique of the naive kernel (nothing to review when no
            # round will run, or when the baseline is PyTorch eager rather than a kernel)
            reviewed = {} if stop or not kernel_baseline else review.review_baseline(deps, res, naive)
            return {"baseline": base, "best": best.model_dump(), "round": 0, "plateau_ref_ms": best.ms,
                    "plateau_count": 0, "failed_rounds": 0, "critique": reviewed.get("critique", {}),
                    "tokens": reviewed.get("tokens", {}), "evaluations": 0,
                    "stop_reason": stop, "archive": search.ARCHIVE_FILE,
                    "elapsed_s": deps.elapsed(), "last_round_s": 0.0}
    return setup


def _stop_at_setup(deps: Deps, state: GraphState, best: BestSummary) -> str | None:
    """A naive kernel already at the speed-of-light target leaves nothing to search for."""
    lim = _limits(state)
    if stop_rules.sol_reached(best.pct_sol, lim.sol_target):
        deps.event("decision", kind="stop", reason=stop_rules.SPEED_OF_LIGHT, round=0,
                   text=stop_rules.reason_text(stop_rules.SPEED_OF_LIGHT, lim))
        return stop_rules.SPEED_OF_LIGHT
    return None


def route_after_setup(state: GraphState) -> str:
    return "finalize" if state.get("stop_reason") else "plan"


SEED_ID = "seed"


def _library(deps: Deps) -> float | None:
    """The library yardstick's median (cuBLAS, CUB) for the report's "speedup over the library"; best effort."""
    if deps.task.library_path is None:
        return None
    try:
        res = deps.evaluator.library(deps.loaded)
    except Exception as exc:  # noqa: BLE001 - a yardstick must never stop the run
        deps.event("warning", where="library", error=short(str(exc), 300))
        return None
    if res is None or not res.status.passed or res.timing is None:
        return None
    deps.event("baseline", which="library", status=res.status.value, median_ms=res.timing.median_ms)
    return res.timing.median_ms


def _seed(deps: Deps, state: GraphState) -> BestSummary:
    """The user's kernel (optimize --start-from), evaluated like a candidate: the first parent when it passes,
    else the run halts with its verdict before any LLM call."""
    source = Path(deps.rundir.candidate_path(SEED_ID)).read_text()
    h = deps.put_source(source)
    got = deps.evaluator.evaluate_cached(deps.loaded, source, SEED_ID, Path(deps.rundir.root) / "work" / SEED_ID)
    res: EvalResult = got.value
    deps.rundir.write_result(SEED_ID, res)
    deps.event("evaluation", candidate=SEED_ID, round=0, status=res.status.value, cached=not got.fresh,
               median_ms=res.median_ms, note=short(failure_text.note(res), 300), purpose="start-from")
    if res.status != Status.ok or res.timing is None:
        raise halts.RunHalted(halts.SEED_FAILED, f"your kernel does not pass: {failure_text.describe(res, full=True)}",
                                   "fix it (`cuda-llm eval TASK KERNEL.cu` shows every case) and start again, or start "
                                   "from the naive baseline (no --start-from)")
    lo, hi = interval(res.timing)
    search.record_kernel(deps, state, SEED_ID, h, res, lo, hi)   # the first parent, in the program database
    return BestSummary(id=SEED_ID, hash=h, ms=res.timing.median_ms, lo=lo, hi=hi, pct_sol=res.timing.pct_of_sol)


def baseline_halt(deps: Deps, res: EvalResult) -> halts.RunHalted:
    """Why the naive baseline stops the run, and what the user does about it."""
    if res.status == Status.no_device:
        return halts.RunHalted(halts.NO_DEVICE, "there is no CUDA device to measure the baseline on",
                                    f"run `cuda-llm resume {deps.rundir.run_id}` on a machine with an NVIDIA GPU "
                                    "(`cuda-llm doctor` checks one)")
    folder = deps.task.folder
    return halts.RunHalted(
        halts.BASELINE_FAILED,
        f"the naive baseline of {deps.task.name} fails ({failure_text.note(res)})",
        f"fix {folder}/naive.cu or {folder}/reference.py (`cuda-llm check-task {folder}` runs the reference on the "
        f"CPU; `cuda-llm eval {deps.task.name} {folder}/naive.cu` shows every case), then "
        f"`cuda-llm resume {deps.rundir.run_id}`; nothing was spent on the LLM")


def check_no_code(deps: Deps, lim: Limits) -> None:
    """Halt before asking for more code when the coder's last answers held none."""
    if halts.no_code_halt(deps.no_code_streak, lim.max_no_code):
        raise halts.RunHalted(
            halts.NO_CODE,
            f"the last {deps.no_code_streak} coder answers held no usable ```cuda block with the entry point",
            f"read them (`cuda-llm show {deps.rundir.run_id} CANDIDATE`, answers/coder-*.md); use a coder model "
            f"that writes CUDA, or resume (`cuda-llm resume {deps.rundir.run_id}`) to give it {lim.max_no_code} more tries")


# ---------------------------------------------------------------- plan
def make_plan(deps: Deps) -> Callable[[GraphState], dict]:
    def plan(state: GraphState) -> dict:
        lim = _limits(state)
        round_ = int(state.get("round", 0)) + 1
        check_no_code(deps, lim)
        with deps.tracer.node("plan", round=round_), call_label(f"r{round_}"):
            best = BestSummary(**state.get("best", {}))
            history = evidence.history(deps, round_)
            tokens: dict[str, dict] = {}
            rationale = ""
            model = deps.models.get("planner")
            parents = search.choose_parents(deps, state, round_, lim.n_candidates)
            free = planning.free_slots(lim.n_candidates, lim.free_slots, round_)
            planned = [s for s in range(lim.n_candidates) if s not in free]   # slots the planner fills
            picks: list[Any] = []
            if not planned:
                source = "free (no planner call)"
            elif model is None:
                picks, source = _bandit(deps, round_, lim, [parents[s] for s in planned]), "bandit (rules planner)"
            else:
                offered = planning.offer(deps, round_, best.id)
                ctx = PlannerContext(task=evidence.task_brief(deps), device=deps.device, n_candidates=len(planned),
                                     free_slots=len(free), round_index=round_, offered=offered,
                                     best=evidence.parent_kernel(deps, best.id, features=best.features, median_ms=best.ms),
                                     critique=evidence.load_critique(deps, best.id), history=history,
                                     blocked=[sorted(s) for s in planning.run_failed_ideas(deps, round_).get(best.id, ())],
                                     budget_chars=deps.prompt_budget("planner"))
                try:
                    plan_, answer = plan_round(model, ctx)
                    tokens["planner"] = _usage(answer.usage)
                    picks, source, rationale = plan_.candidates, "planner", plan_.rationale
                    notes = plan_.adjustments + planning.fit_to_parents(deps, round_, picks, [parents[s] for s in planned])
                    if notes:
                        deps.event("decision", kind="plan_adjusted", round=round_, adjustments=notes[:6])
                except LLMAnswerError as exc:
                    tokens["planner"] = _usage(exc.usage)
                    picks = _bandit(deps, round_, lim, [parents[s] for s in planned])
                    source = "bandit (planner answer unusable)"
                    deps.event("warning", where="planner", error=short(str(exc), 300))
            it = iter(picks)
            cands = [CandidatePlan(features=[], idea="") if s in free else next(it) for s in range(lim.n_candidates)]
            jobs = planning.jobs_for(deps, round_, cands, parents, by=source, rationale=rationale)
            for j in jobs:
                j.update(fix_turns=lim.compile_fix_turns, refine_turns=lim.refine_turns,
                         refine_tokens=_refine_tokens(state, lim, len(cands)))
            deps.event("decision", kind="features", round=round_, by=source,
                       candidates={j["cid"]: j["features"] for j in jobs})
            deps.event("decision", kind="parents", round=round_,
                       candidates={j["cid"]: {"parent": p["parent"], "kind": p["kind"], "why": p["why"],
                                              "inspirations": p["inspirations"]} for j, p in zip(jobs, parents)})
            coding.write_context(deps, round_, 0, history)
            deps.progress_call("round_start", round_, [j["features"] for j in jobs])
            return {"round": round_, "jobs": jobs, "cands": {RESET: True}, "repair_attempt": 0, "round_done": False,
                    "round_started_s": deps.elapsed(), "elapsed_s": deps.elapsed(), "tokens": tokens}

    def _bandit(deps: Deps, round_: int, lim: Limits, parents: list[dict[str, Any]]) -> list[Any]:
        sets = planning.bandit_plan(deps, round_, lim.features_per_candidate, parents)
        return [CandidatePlan(features=s, idea="") for s in sets]

    return plan


def _refine_tokens(state: GraphState, lim: Limits, n: int) -> int:
    """Each coder's share of the tokens still in the budget (refinement turns stay within it)."""
    left = lim.token_budget - total_tokens(state.get("tokens"))
    return max(0, left // max(n, 1))


def route_jobs(state: GraphState) -> list[Send]:
    """Fan out: one ``code`` task per job (the Send payload is the small job dict only)."""
    return [Send("code", job) for job in state.get("jobs") or []]


# ---------------------------------------------------------------- code (one candidate)
def make_code(deps: Deps) -> Callable[[dict], dict]:
    def code(job: dict) -> dict:
        cid = job["cid"]
        with deps.tracer.node("code", candidate=cid, round=job["round"], attempt=job.get("attempt", 0)), call_label(cid):
            ctx = coding.coder_context(deps, job)
            cand = Candidate(id=cid, round=job["round"], slot=job["slot"], attempt=job.get("attempt", 0),
                             parent=job.get("parent", "baseline"), parent_ms=job.get("parent_ms"),
                             features=job["features"], repair_of=job.get("repair_of"))
            turns = int(job.get("fix_turns", 0))
            check = coding.build_check(deps, cid) if deps.precompile else None
            try:
                answer = write_kernel(deps.models["coder"], ctx, fix_turns=turns, check=check,
                                      call_kwargs=coding.call_kwargs(deps, job["slot"]))
            except LLMAnswerError as exc:
                deps.event("candidate", candidate=cid, status="no_code", note=coding.coder_note(exc))
                deps.count_code(False)
                cand = cand.model_copy(update={"status": "no_code", "note": short(str(exc))})
                return {"cands": {cid: cand.model_dump(exclude_defaults=True)}, "tokens": {"coder": _usage(exc.usage)}}
            deps.count_code(True)
            h = deps.put_source(answer.source)
            path = deps.rundir.write_candidate(cid, answer.source)
            built = None
            if check is not None and turns == 0:   # no fix turns: still build here, in parallel with the others
                built = deps.evaluator.build(deps.loaded, answer.source, cid)
            deps.event("candidate", candidate=cid, source_hash=h, path=str(path), features=job["features"],
                       parent=cand.parent, repair_of=cand.repair_of, coder_attempts=answer.attempts,
                       fix_turns=answer.fix_turns, builds=coding.known_build(answer, turns, check is not None, built))
            cand = cand.model_copy(update={"hash": h})
            out, usage = {cid: cand.model_dump(exclude_defaults=True)}, answer.usage
            if job.get("refine_turns") and not job.get("repair_of"):   # more turns on its own candidate
                more, extra = refine.refine(deps, job, cand, answer, ctx, model=deps.models["coder"],
                                            best_ms=ctx.parent.median_ms if ctx.parent else None)
                out, usage = {**out, **more}, usage + extra
            return {"cands": out, "tokens": {"coder": _usage(usage)}}
    return code


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
            search.record_round(deps, state, passing, lambda c: _result(deps, c))
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
            elsewhere = _timed_elsewhere(deps, res, best)
            if not ok and elsewhere and is_win(res) and best.hash and worth_a_head_to_head(interval(res.timing), best_iv):
                ok = True        # two GPUs' timings are not compared: the head-to-head below decides on one GPU
            elif not ok and elsewhere:
                why += (f" (timed on GPU {res.gpu}, the best on GPU {elsewhere}: slower by more than the "
                        f"{100 * CROSS_GPU_SPREAD:g}% two GPUs of a kind differ)")
            against_kernel = ok and best_iv is not None and bool(best.hash)
            clear_win = against_kernel and decisive(interval(res.timing), best_iv)
            if against_kernel and not clear_win:
                ok, why, confirm_iv, n = _head_to_head(deps, c, best)    # the best is a kernel: head to head
                update["evaluations"] = int(state.get("evaluations", 0)) + n
            elif ok:           # nothing timed to compare with, or a decisive win (selection.py): a re-run
                got = deps.evaluator.evaluate_cached(deps.loaded, deps.source(c.hash), f"{c.id}-confirm",
                                              Path(deps.rundir.root) / "work" / f"{c.id}-confirm", kind="confirm")
                confirm = got.value
                deps.rundir.write_result(f"{c.id}-confirm", confirm)
                deps.event("evaluation", candidate=f"{c.id}-confirm", round=c.round, status=confirm.status.value,
                           cached=not got.fresh, median_ms=confirm.median_ms, purpose="confirm")
                ok, why = decide(res, best_iv, confirm)
                if clear_win:
                    why += f" ({DECISIVE_RATIO:g}x or more below {best.id}: confirmed without re-timing it)"
                if confirm.timing is not None:
                    confirm_iv = interval(confirm.timing)
                update["evaluations"] = int(state.get("evaluations", 0)) + 1
            deps.event("decision", kind="selection", round=state.get("round"), candidate=c.id, replaced=ok, why=why,
                       best_before=best.id, best_before_ms=best.ms, candidate_ms=c.ms)
            if ok:
                lo = min(c.lo, confirm_iv[0]) if confirm_iv else c.lo
                hi = max(c.hi, confirm_iv[1]) if confirm_iv else c.hi
                # the % of speed of light of the same timing as ``ms`` (the stop rule reads it; a faster confirming
                # re-run must not end a run the recorded time does not justify)
                new = BestSummary(id=c.id, round=c.round, hash=c.hash, ms=c.ms, lo=lo, hi=hi, features=c.features,
                                  profile=c.profile, bottleneck=c.bottleneck,
                                  pct_sol=c.pct_sol if c.pct_sol is not None else _pct_of(res))
                update["best"] = new.model_dump()
                deps.rundir.write_text("best_so_far.cu", deps.source(c.hash))
            return update
    return select


def _timed_elsewhere(deps: Deps, res: EvalResult, best: BestSummary) -> str | None:
    """The GPU that timed the best, when a pool's other GPU timed ``res``; None on one GPU (or unknown)."""
    if res.gpu is None or best.id == "baseline" or not best.hash:
        return None
    mine = deps.rundir.read_result(best.id)
    return mine.gpu if mine is not None and mine.gpu is not None and mine.gpu != res.gpu else None


def _head_to_head(deps: Deps, c: Candidate, best: BestSummary) -> tuple[bool, str, tuple[float, float] | None, int]:
    """Challenger ``c`` and the best timed in turns in one job (graph/selection.py): (kept, why, the interval of
    the challenger's legs, how many evaluations). Every leg is in the trace and the whole in head_to_head/."""
    work = Path(deps.rundir.root) / "work" / f"{c.id}-vs-{best.id}"
    got = deps.evaluator.head_to_head_cached(deps.loaded, deps.source(c.hash), deps.source(best.hash), c.id, best.id, work)
    h2h = got.value
    deps.rundir.write_text(f"head_to_head/{c.id}-vs-{best.id}.json", h2h.model_dump_json(indent=1))
    for who, leg in zip(h2h.order, h2h.legs):
        deps.event("evaluation", candidate=leg.candidate, round=c.round, status=leg.status.value, cached=not got.fresh,
                   median_ms=leg.median_ms, purpose="head-to-head", side=who)
    ok, why = head_to_head_decision(h2h)
    ours = [interval(r.timing) for r in h2h.of(CHALLENGER) if r.timing is not None]
    iv = (min(lo for lo, _ in ours), max(hi for _, hi in ours)) if ours else None
    return ok, why, iv, len(h2h.legs) if got.fresh else 0


def _pct_of(res: EvalResult | None) -> float | None:
    return res.timing.pct_of_sol if res is not None and res.timing is not None else None


# ---------------------------------------------------------------- critique
def make_critique(deps: Deps) -> Callable[[GraphState], dict]:
    def critique_node(state: GraphState) -> dict:
        lim = _limits(state)
        round_ = int(state.get("round", 0))
        cands = round_cands(state)
        update: dict[str, Any] = {}
        with deps.tracer.node("critique", round=round_):
            passing = [c for c in cands if c.status == Status.ok.value and c.ms is not None]
            reviewed = (state.get("critique") or {}).get("candidate")
            if passing and min(passing, key=lambda x: x.ms).id != reviewed:   # a repair pass: not reviewed twice
                c = min(passing, key=lambda x: x.ms)
                brief, usage = review.review(deps, c, round_, cands)
                update["tokens"] = {"critic": _usage(usage)}
                update["critique"] = review.state_critique(brief)
            # the round ends unless a failed candidate is to be repaired (see coding.repair_targets)
            attempt = int(state.get("repair_attempt", 0))
            targets = coding.repair_targets(cands, evidence.passed_feature_sets(deps, round_, cands), attempt,
                                            lim.max_repairs, lim.n_candidates)
            tokens_now = total_tokens(state.get("tokens")) + sum(update.get("tokens", {}).get("critic", {}).get(k, 0)
                                                                  for k in ("input", "output"))
            elapsed = deps.elapsed()
            budget = lim
            if targets:
                reason = stop_rules.hard_stop(elapsed_s=elapsed, tokens=tokens_now, budget=budget)
                if reason is None:
                    passed_any = any(c.status in PASSED for c in cands)
                    deps.event("decision", kind="repair", round=round_, attempt=attempt + 1,
                               candidates=[c.id for c in targets],
                               why="feature sets new to the run" if passed_any else "no candidate of the round passed")
                    update.update(round_done=False, elapsed_s=elapsed)
                    return update
                update.update(_end_round(deps, state, cands, elapsed))
                update["stop_reason"] = reason
            else:
                update.update(_end_round(deps, state, cands, elapsed))
                reason = stop_rules.stop_after_round(
                    round_=round_, plateau_count=update["plateau_count"], elapsed_s=elapsed, tokens=tokens_now,
                    budget=budget, last_round_s=update["last_round_s"],
                    best_pct_of_sol=BestSummary(**state.get("best", {})).pct_sol,
                    failed_rounds=update["failed_rounds"])
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
                           text=stop_rules.reason_text(update["stop_reason"], lim))
            update["elapsed_s"] = elapsed
            return update
    return critique_node


def _end_round(deps: Deps, state: GraphState, cands: list[Candidate], elapsed: float) -> dict[str, Any]:
    lim = _limits(state)
    best = BestSummary(**state.get("best", {}))
    base_ms = (state.get("baseline") or {}).get("ms")
    passed = any(c.status in PASSED for c in cands)
    ref, count = stop_rules.update_plateau(state.get("plateau_ref_ms"), int(state.get("plateau_count", 0)), best.ms,
                                           lim.plateau_threshold, round_passed=passed)
    history = [evidence.history_item(c, base_ms).model_dump(mode="json", exclude_defaults=True) for c in cands]
    deps.rundir.write_text(f"rounds/r{state.get('round', 0)}/history.json", json.dumps(history, indent=1))
    deps.rundir.write_text(f"rounds/r{state.get('round', 0)}/candidates.json",
                           json.dumps([c.model_dump(mode="json") for c in cands], indent=1))
    coding.record_final_failures(deps, cands)   # a failure counts against its features only after its repairs
    return {"plateau_ref_ms": ref, "plateau_count": count, "round_done": True,
            "failed_rounds": stop_rules.update_failed(int(state.get("failed_rounds", 0)), passed),
            "last_round_s": round(elapsed - float(state.get("round_started_s", elapsed)), 3)}


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
        attempt = int(state.get("repair_attempt", 0))
        round_ = int(state.get("round", 0))
        check_no_code(deps, lim)
        with deps.tracer.node("repair", round=round_, attempt=attempt + 1):
            cands = round_cands(state)
            targets = coding.repair_targets(cands, evidence.passed_feature_sets(deps, round_, cands), attempt,
                                            lim.max_repairs, lim.n_candidates)
            jobs = coding.repair_jobs(deps, round_, attempt + 1, targets)
            for j in jobs:
                j["fix_turns"] = lim.compile_fix_turns
            coding.write_context(deps, round_, attempt + 1, evidence.history(deps, round_, cands))
            deps.event("decision", kind="repair_jobs", round=round_, attempt=attempt + 1,
                       candidates={j["cid"]: j["repair_of"] for j in jobs})
            return {"repair_attempt": attempt + 1, "jobs": jobs, "elapsed_s": deps.elapsed()}
    return repair


# ---------------------------------------------------------------- finalize
def make_finalize(deps: Deps) -> Callable[[GraphState], dict]:
    def finalize(state: GraphState) -> dict:
        with deps.tracer.node("finalize"):
            best = BestSummary(**state.get("best", {}))
            source = deps.source(best.hash)
            got = deps.evaluator.final_check_cached(deps.loaded, source, best.id, Path(deps.rundir.root) / "work" / "final")
            cand, base = got.value
            deps.rundir.write_result("final", cand)
            deps.rundir.write_result("final-baseline", base)
            Path(deps.rundir.best_path).write_text(source)
            final = {"candidate": best.id, "status": cand.status.value, "ms": cand.median_ms,
                     "baseline_status": base.status.value, "baseline_ms": base.median_ms,
                     "baseline_label": deps.task.baseline_label, "library_ms": base.library_ms,
                     "library_label": deps.task.library_label,
                     "speedup": (base.median_ms / cand.median_ms) if base.median_ms and cand.median_ms else None,
                     "pct_of_sol": cand.timing.pct_of_sol if cand.timing is not None else None,
                     "sol_ms": cand.timing.sol_ms if cand.timing is not None else None,
                     "sol_basis": cand.timing.sol_basis if cand.timing is not None else None,
                     "note": short(cand.message), "best_path": str(deps.rundir.best_path)}
            deps.event("final", **final, stop_reason=state.get("stop_reason"), cached=not got.fresh)
            return {"final": final, "elapsed_s": deps.elapsed()}
    return finalize
