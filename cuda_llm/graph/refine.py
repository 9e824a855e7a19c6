"""Refinement on a trajectory: a coder takes more turns on its own passing candidate within a round.

After the coder's answer (and any compile-fix turns, which fix compile errors before anything runs),
its candidate is measured through the Evaluator seam (one coder at a time on the GPU: ``deps.gpu_lock``)
and profiled; the coder then gets its own time, % of speed of light, ptxas resources and profile in
the same conversation and writes the next version. Each turn is a candidate of its own (``r3c1t1``,
parent the turn before), so the evaluate stage, selection, the program database and the statistics see
every step. A turn runs only while the candidate before it passed (failures go to repair), the
coder's share of the token budget allows another answer as large as the last, and no stop was asked.

Evaluations and LLM answers are cached by source and by conversation, so a run killed in the middle of a
trajectory replays it on resume without paying twice; the evaluate stage later finds every turn cached.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from langchain_core.messages import HumanMessage

from cuda_llm.figures import fmt_pct
from cuda_llm.graph import coding
from cuda_llm.graph.state import Candidate, candidate_id, short
from cuda_llm.results import EvalResult, Status
from cuda_llm.agents.coder import continue_kernel
from cuda_llm.agents.context import render_resources
from cuda_llm.agents.errors import LLMAnswerError
from cuda_llm.agents.prompts import render
from cuda_llm.agents.usage import TokenUsage
from cuda_llm.graph.stage_inputs import applicable_feature_ids

AfterAnswer = Callable[[Any, Any], Any]     # (answer, context) -> answer: e.g. the compile-fix turns


def evaluation_text(res: EvalResult, parent_ms: float | None, best_ms: float | None) -> str:
    """What the coder is told of its candidate's measurement (the harness's headline: no held-out sizes)."""
    lines = [res.message.strip() or res.status.value]
    ms = res.median_ms
    if ms:
        if parent_ms:
            lines.append(f"{parent_ms / ms:.2f}x its parent's {parent_ms:.4f} ms")
        if best_ms:
            lines.append(f"the run's best so far: {best_ms:.4f} ms")
    if res.timing is not None and res.timing.sol_ms:
        pct = f" ({fmt_pct(res.timing.pct_of_sol)}% of it)" if res.timing.pct_of_sol is not None else ""
        lines.append(f"speed-of-light bound at the benchmark shape: {res.timing.sol_ms:.4f} ms{pct}"
                     + (f". {res.timing.sol_basis}" if res.timing.sol_basis else ""))
    return "\n".join(f"- {x}" for x in lines)


def profile_text(deps: Any, source: str, cid: str, res: EvalResult) -> str:
    """Nsight Compute summary and the rule-based diagnosis (through the Evaluator seam, cached)."""
    try:
        with deps.gpu_lock:
            prof = deps.evaluator.profile(deps.loaded, source, cid, Path(deps.rundir.root) / "work" / cid, res)
    except Exception as exc:  # noqa: BLE001 - a profiler problem must not cost the turn
        return f"(not available: {type(exc).__name__}: {short(str(exc), 200)})"
    if prof is None or not getattr(prof, "available", False):
        return f"(not available: {getattr(prof, 'reason', '') or 'no profiler'})"

    analysis = deps.evaluator.analyze(deps.loaded, res, prof, applicable_feature_ids(deps))
    return prof.summary().strip() + "\n" + analysis.diagnosis.as_text()


def refine(deps: Any, job: dict, first: Candidate, answer: Any, ctx: Any, *, model: Any,
           after_answer: AfterAnswer | None = None, best_ms: float | None = None) -> tuple[dict[str, dict], Any]:
    """Run the refinement turns after ``first`` (the coder's first answer): the new candidates (by id, as
    state patches) and the tokens they used."""
    turns = int(job.get("refine_turns") or 0)
    share = job.get("refine_tokens")
    out: dict[str, dict] = {}
    used = TokenUsage()
    prev, prev_answer = first, answer
    spent = answer.usage.total_tokens
    for turn in range(1, turns + 1):
        if deps.stop_requested.is_set():
            break
        if share is not None and spent + prev_answer.usage.total_tokens > share:
            deps.event("decision", kind="refine_skipped", candidate=prev.id, reason="token budget share spent")
            break
        source = deps.source(prev.hash)
        with deps.gpu_lock:
            res: EvalResult = deps.evaluator.evaluate(deps.loaded, source, prev.id, Path(deps.rundir.root) / "work" / prev.id)
        if res.status != Status.ok or res.timing is None:
            break
        cid = candidate_id(first.round, first.slot, first.attempt, turn)
        feedback = render("coder_refine", previous=prev.id, candidate=cid, turn=turn, turns=turns,
                          evaluation=evaluation_text(res, prev.parent_ms, best_ms),
                          resources=render_resources(res.compile.kernels if res.compile else []),
                          profile=profile_text(deps, source, prev.id, res))
        turn_ctx = ctx.model_copy(update={"candidate": cid})
        try:   # the same compile-fix turns and temperature as the coder's first answer
            ans = continue_kernel(model, [*prev_answer.messages, HumanMessage(content=feedback)], turn_ctx,
                                  fix_turns=int(job.get("fix_turns", 0)), check=coding.build_check(deps, cid),
                                  call_kwargs=coding.call_kwargs(deps, first.slot))
        except LLMAnswerError as exc:
            used = used + exc.usage if exc.usage is not None else used
            deps.event("candidate", candidate=cid, status="no_code", refine_of=prev.id, note=short(str(exc), 300))
            break
        if after_answer is not None:
            ans = after_answer(ans, turn_ctx)
        used = used + ans.usage
        spent += ans.usage.total_tokens
        h = deps.put_source(ans.source)
        path = deps.rundir.write_candidate(cid, ans.source)
        cand = Candidate(id=cid, round=first.round, slot=first.slot, attempt=first.attempt, turn=turn, parent=prev.id,
                         parent_ms=res.timing.median_ms, features=first.features, hash=h)
        deps.event("candidate", candidate=cid, source_hash=h, path=str(path), features=first.features, parent=prev.id,
                   refine_of=prev.id, turn=turn, coder_attempts=ans.attempts)
        out[cid] = cand.model_dump(exclude_defaults=True)
        prev, prev_answer = cand, ans
    return out, used
