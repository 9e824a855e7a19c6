"""The RunSummary of a finished (or stopped) run, from its state and the per-round files on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cuda_llm.report.markdown import CandidateSummary, RoundSummary, RunSummary
from cuda_llm.agents.usage import total_tokens
from cuda_llm.figures import fmt_ms
from cuda_llm.results import baseline_label
from cuda_llm.runs.replay import replay_line
from cuda_llm.runs.rundir import read_json
from cuda_llm.tasks import load_task
from cuda_llm.runs.trace import read_trace


def credits(events: list[dict]) -> dict[str, dict]:
    """Each measured candidate's credit event (what the detectors found new in it over its parent, and which
    asked features they did not find): the one record of detected features every view reads."""
    return {str(e.get("candidate")): e for e in events if e.get("event") == "credit"}


def _rounds(rundir: Any, n_rounds: int, base_ms: float | None, current: dict[str, dict],
            credit: dict[str, dict] | None = None) -> list[RoundSummary]:
    """Finished rounds from their candidates.json; the round in progress (no file yet) from the state."""
    credit = credit or {}
    rounds: list[RoundSummary] = []
    best_ms = base_ms
    for r in range(1, n_rounds + 1):
        p = Path(rundir.root) / "rounds" / f"r{r}" / "candidates.json"
        if p.is_file():
            cands = json.loads(p.read_text())
        elif r == n_rounds and current:
            cands = [{"id": cid, **c} for cid, c in sorted(current.items())]
        else:
            continue
        rows = [CandidateSummary(id=c["id"], parent=c.get("parent"), features=c.get("features") or [],
                                 status=c.get("status") or "not_run", median_ms=c.get("ms"),
                                 speedup=(base_ms / c["ms"]) if base_ms and c.get("ms") else None,
                                 message=c.get("note") or "",
                                 detected=credit[c["id"]].get("credited") or [] if c["id"] in credit else None,
                                 absent=(credit.get(c["id"]) or {}).get("absent") or []) for c in cands]
        repairs = max((c.get("attempt", 0) for c in cands), default=0)
        ok = [c["ms"] for c in cands if c.get("status") == "ok" and c.get("ms")]
        if ok and (best_ms is None or min(ok) < best_ms):
            best_ms = min(ok)  # display only; the state's best is the confirmed one
        note = f"{repairs} repair attempt(s)" if repairs else ("no candidate passed" if not ok else "")
        if not p.is_file():
            note = "in progress" + (f", {note}" if repairs else "")
        rounds.append(RoundSummary(index=r, candidates=rows, best_ms=None, note=note))
    return rounds


def build_summary(rundir: Any, values: dict[str, Any]) -> RunSummary:
    """From the run's state (its checkpoint) and files; a run that has not finished gets the rounds so far
    and best_so_far.cu instead of best.cu (written only by the final check)."""
    base = values.get("baseline") or {}
    best = values.get("best") or {}
    final = values.get("final") or {}
    events = _trace_lines(rundir)
    rounds = _rounds(rundir, int(values.get("round") or 0), base.get("ms"), values.get("cands") or {}, credits(events))
    history_best = {}
    for line in events:
        if line.get("event") == "round_end":
            history_best[line.get("round")] = line.get("best_ms")
    for r in rounds:
        r.best_ms = history_best.get(r.index)
    tokens = {role: int(u.get("input", 0)) + int(u.get("output", 0)) for role, u in (values.get("tokens") or {}).items()}
    check = ""
    if final:
        check = (f"{final.get('candidate')} re-validated on fresh inputs: {final.get('status')}; "
                 f"{_ms(final.get('ms'))} vs {baseline_label(base)} {_ms(final.get('baseline_ms'))} in the same run")
        if final.get("speedup"):
            check += f" ({final['speedup']:.2f}x)"

    sol = final or _best_timing(rundir, best)
    return RunSummary(
        replay=replay_line(rundir), task=str(values.get("task") or "?"), run_id=rundir.run_id, device=values.get("device"), baseline_ms=base.get("ms"),
        best_candidate=best.get("id"), best_ms=final.get("ms") or best.get("ms"), stop_reason=values.get("stop_reason"),
        rounds=rounds, tokens_by_role=tokens, seconds=float(values.get("elapsed_s") or 0.0), final_check=check,
        best_path=_best_path(rundir, best, final), best_pct_of_sol=sol.get("pct_of_sol"),
        best_sol_ms=sol.get("sol_ms"), best_sol_basis=sol.get("sol_basis") or "",
        best_profile=profile_line(best), library_ms=base.get("library_ms"),
        baseline_label=baseline_label(base), library_label=base.get("library_label") or "library",
        best_round_ms=best.get("ms"), final_ms=final.get("ms") if final.get("candidate") == best.get("id") else None,
        **_bottleneck_views(rundir, best),
    )


def _bottleneck_views(rundir: Any, best: dict[str, Any]) -> dict[str, str]:
    """The best kernel's bottleneck (its profile's diagnosis, the one source), the task's declared bound and the
    roof its speed-of-light bound is: three answers to three questions, named apart in the report."""
    cid = best.get("id")
    prof = (read_json(Path(rundir.root) / "profiles" / f"{cid}.json") or {}) if cid else {}
    bottleneck = str((prof.get("diagnosis") or {}).get("bottleneck") or best.get("bottleneck") or "")
    try:
        task_bound = str(load_task(str(rundir.load_config().get("task"))).task.bound or "")
    except Exception:  # noqa: BLE001 - a moved or broken task: the report goes on without its declared bound
        task_bound = ""
    return {"best_bottleneck": "" if bottleneck == "unknown" else bottleneck, "task_bound": task_bound,
            "sol_limiter": str((prof.get("roofline") or {}).get("limiter") or "")}


def _best_timing(rundir: Any, best: dict[str, Any]) -> dict[str, Any]:
    """The best kernel's bound as its own evaluation gave it, for a run whose final check has not run yet."""
    cid = best.get("id")
    if not cid or cid == "baseline":
        return {}
    try:
        res = rundir.read_result(cid)
    except (OSError, ValueError):
        return {}
    timing = res.timing if res is not None else None
    return timing.model_dump() if timing is not None else {}


def profile_line(best: dict[str, Any]) -> str:
    """What the profiler said about the best kernel: its bottleneck and the one-line summary."""
    text, bottleneck = str(best.get("profile") or ""), str(best.get("bottleneck") or "")
    if not text or text.startswith("no profile"):
        return ""
    return text if not bottleneck or bottleneck == "unknown" or bottleneck in text else f"{bottleneck}: {text}"


def _best_path(rundir: Any, best: dict[str, Any], final: dict[str, Any]) -> str | None:
    if final and Path(rundir.best_path).is_file():
        return str(rundir.best_path)
    so_far = Path(rundir.root) / "best_so_far.cu"    # written each time a new best is confirmed
    return str(so_far) if best.get("id") and so_far.is_file() else None


def _ms(v: float | None) -> str:
    return f"{fmt_ms(v)} ms" if v is not None else "not timed"


def _trace_lines(rundir: Any) -> list[dict]:
    try:
        return read_trace(rundir.trace_path)
    except Exception:  # noqa: BLE001
        return []


__all__ = ["build_summary", "total_tokens"]
