"""One coder task, and the repair policy.

A coder task gets its parent with all the evidence, its features with their how-to and whole exemplars,
the planner's whole idea and the history; its answer is compiled through the Evaluator seam and the build
errors go back to the coder in the same conversation, up to ``compile_fix_turns`` times, before the
candidate is evaluated. The round's candidates get a temperature each from the coder's spread.

After evaluation a failed candidate is repaired (within ``max_repairs`` attempts per round) when nothing
of the round passed, or when its feature set is new to the run, so an ambitious candidate is not dropped
because a simple sibling passed. A failure is charged to the feature statistics only once its repairs
failed too (``record_final_failures`` at the end of the round); passes are recorded when measured.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

from cuda_llm.agents.context import HistoryItem
from cuda_llm.graph import evidence, search
from cuda_llm.graph.state import Candidate, candidate_id, short
from cuda_llm.results import EvalResult, Status
from cuda_llm.tools.harness import failure_text
from cuda_llm.agents.coder import CoderContext, RepairInfo
from cuda_llm.graph.stages import EvaluateStage

REPAIRABLE = {Status.compile_error.value, Status.wrong_answer.value, Status.runtime_error.value,
              Status.static_error.value, Status.timeout.value}
BUILD_FAILED = {Status.compile_error, Status.static_error}


def build_check(deps: Any, cid: str) -> Callable[[str], str | None]:
    """source -> what the coder is told when it does not build (the one failure formatter), else None."""
    def check(source: str) -> str | None:
        res = deps.evaluator.build(deps.loaded, source, cid)
        if res.status in BUILD_FAILED:
            deps.event("compile_fix", candidate=cid, status=res.status.value, note=failure_text.note(res))
            return failure_text.describe(res, full=True)
        return None
    return check


def known_build(answer: Any, turns: int, checked: bool, built: EvalResult | None) -> bool | None:
    """Whether the coder's final source builds, where that is known without another compile: the build made
    beside the coder (no fix turns), the check that passed before the fix turns ran out, or the errors left
    when a fix turn's answer was unusable. None when the last source was never checked (the evaluation says)."""
    if answer.build_errors is not None:
        return False
    if built is not None:
        return built.status not in BUILD_FAILED
    return True if checked and answer.fix_turns < turns else None


def context_path(round_: int, attempt: int) -> str:
    return f"rounds/r{round_}/coder_context.json" if not attempt else f"rounds/r{round_}/coder_context-a{attempt}.json"


def write_context(deps: Any, round_: int, attempt: int, items: list[HistoryItem]) -> None:
    """What every coder of a round (or a repair attempt) sees besides its own job: on disk, not in the Send."""
    evidence.write_json(deps, context_path(round_, attempt), {"history": [h.model_dump(mode="json") for h in items]})


def read_context(deps: Any, round_: int, attempt: int) -> list[HistoryItem]:
    data = evidence.read_json(Path(deps.rundir.root) / context_path(round_, attempt)) or {}
    return [HistoryItem(**h) for h in data.get("history") or []]


def coder_context(deps: Any, job: dict) -> Any:
    """The CoderContext of one job: a new candidate, or the repair of a failed one."""
    repair = None
    if job.get("repair_of"):
        res = deps.rundir.read_result(job["repair_of"]) or (deps.evaluator.stored("eval", job["failed_hash"])
                                                            if job.get("failed_hash") else None)
        repair = RepairInfo(failed_candidate=job["repair_of"], failed_source=deps.source(job["failed_hash"]),
                            errors=repair_errors(res))
    parent = evidence.parent_kernel(deps, job.get("parent") or evidence.BASELINE, median_ms=job.get("parent_ms"),
                                    features=job.get("parent_features") or ())
    if job.get("parent_kind") and not job.get("repair_of"):   # which kind of parent the program database chose
        parent = parent.model_copy(update={"role": search.parent_role(job["parent_kind"], job.get("parent_why", ""))})
    inspirations = [evidence.parent_kernel(deps, pid).model_copy(update={"label": "Inspiration", "role": search.INSPIRATION_ROLE})
                    for pid in job.get("inspirations") or () if not job.get("repair_of")]
    # the parent's source is shown once: an inspiration that is the same kernel under another id is left out
    inspirations = [k for k in inspirations if k.source.strip() != parent.source.strip()]
    return CoderContext(
        task=evidence.task_brief(deps), device=deps.device, build=evidence.build_brief(deps), candidate=job["cid"],
        features=evidence.feature_briefs(deps, job["features"], job.get("refinements")), free=bool(job.get("free")) and not job["features"],
        idea=evidence.idea_of(deps, job["round"], job["slot"]),
        parent=parent, inspirations=inspirations,
        history=read_context(deps, job["round"], job.get("attempt", 0)), repair=repair,
        budget_chars=deps.prompt_budget("coder"))


def repair_errors(res: EvalResult | None) -> str:
    """What the coder is told about a failure (the one failure formatter, full detail, held-out redacted)."""
    if res is None:
        return "the evaluation result is missing; check the kernel against the contract and rewrite it carefully"
    return failure_text.describe(res, full=True)


def call_kwargs(deps: Any, slot: int) -> dict[str, Any]:
    """This candidate's temperature from the coder's spread (nothing when the coder has no settings)."""
    settings = getattr(deps, "settings", None)
    if settings is None:
        return {}
    t = settings.coder.temperature_for(slot)
    return {"temperature": t} if t is not None and settings.coder.temperatures else {}


# ---------------------------------------------------------------- repair policy (pure)
def repair_targets(cands: Iterable[Candidate], passed_sets: set[frozenset[str]], attempt: int, max_repairs: int,
                   limit: int) -> list[Candidate]:
    """The failed candidates of the latest attempt to repair now: all of them when nothing of the round
    passed, else those whose feature set never passed in this run; none once the attempts are spent."""
    cands = list(cands)
    if attempt >= max_repairs or not cands:
        return []
    latest = max(c.attempt for c in cands)
    failed = [c for c in cands if c.attempt == latest and c.status in REPAIRABLE and c.hash]
    if any(c.status in evidence.PASSED for c in cands):
        failed = [c for c in failed if frozenset(c.features) not in passed_sets]
    return failed[:limit]


def repair_jobs(deps: Any, round_: int, attempt: int, targets: list[Candidate]) -> list[dict]:
    return [{"cid": candidate_id(round_, c.slot, attempt), "round": round_, "slot": c.slot, "attempt": attempt,
             "features": c.features, "parent": c.parent, "parent_ms": c.parent_ms, "repair_of": c.id,
             "failed_hash": c.hash} for c in targets]


def final_failures(cands: Iterable[Candidate]) -> list[Candidate]:
    """Failed, measured candidates with no measured repair: their failure is final (pure)."""
    cands = list(cands)
    repaired = {c.repair_of for c in cands if c.repair_of and c.hash and c.status is not None}
    return [c for c in cands if c.status in REPAIRABLE and c.hash and c.id not in repaired]


def record_final_failures(deps: Any, cands: Iterable[Candidate]) -> None:
    """Charge each final failure to the feature statistics (once: the record is keyed by candidate)."""
    for c in final_failures(cands):
        res = deps.rundir.read_result(c.id) or (deps.evaluator.stored("eval", c.hash) if c.hash else None)
        if res is not None:
            EvaluateStage._record_stats(deps, c, res, None)


def coder_note(exc: Exception) -> str:
    return short(str(exc), 300)
