"""The search over the program database as the nodes use it: recording passing candidates, choosing
each job's parent and inspirations (parents.py), and the briefs the coders are shown of those kernels.

Kept apart from nodes.py so that the nodes only call in: ``record_*`` from setup and select,
``choose_parents`` from plan; the coder's context says why with ``parent_role``.
"""

from __future__ import annotations

from typing import Any

from cuda_llm.graph import parents as parents_mod
from cuda_llm.graph.program_db import ARCHIVE_FILE, Program, ProgramDB
from cuda_llm.graph.state import BestSummary, Candidate, GraphState, Limits
from cuda_llm.results import EvalResult, Status
from cuda_llm.feature_db.detect import detect_features

PARENT_ROLE = {
    parents_mod.BEST: "the kernel to improve on: the current best",
    parents_mod.STONE: "the kernel to improve on: a stepping stone, not the best",
    parents_mod.ELITE: "the kernel to improve on: the best of another approach",
}
INSPIRATION_ROLE = "a different approach that scored well: borrow from it, do not copy it whole"


def archive(deps: Any, state: GraphState) -> ProgramDB:
    return ProgramDB.of_run(deps.rundir.root, state.get("archive") or ARCHIVE_FILE)


def _detected(deps: Any, source: str, res: EvalResult | None) -> list[str]:
    try:
        kernels = res.compile.kernels if res is not None and res.compile is not None else []
        sass = res.compile.sass if res is not None and res.compile is not None else None
        return sorted(detect_features(source, kernels, deps.catalogue or None, sass=sass))
    except Exception as exc:  # noqa: BLE001 - a detector problem must not lose the program
        deps.event("warning", where="program_db", error=str(exc)[:300])
        return []


def _pct(res: EvalResult | None) -> float | None:
    return res.timing.pct_of_sol if res is not None and res.timing is not None else None


def record_kernel(deps: Any, state: GraphState, pid: str, source_hash: str, res: EvalResult, lo: float | None,
                  hi: float | None) -> None:
    """A kernel the run starts from (the naive baseline, a --start-from kernel): a first parent, and a niche
    of its own."""
    if res.status != Status.ok or res.timing is None:
        return
    archive(deps, state).add(Program(id=pid, round=0, hash=source_hash, ms=res.timing.median_ms, lo=lo, hi=hi,
                                     pct_sol=_pct(res), detected=_detected(deps, deps.source(source_hash), res)))


def record_baseline(deps: Any, state: GraphState, source_hash: str, res: EvalResult, lo: float | None,
                    hi: float | None) -> None:
    """The naive kernel is program 0."""
    record_kernel(deps, state, "baseline", source_hash, res, lo, hi)


def record_round(deps: Any, state: GraphState, cands: list[Candidate], result_of: Any) -> int:
    """Every correct, trusted, timed candidate of the round; returns the archive's size."""
    db = archive(deps, state)
    progs = []
    for c in cands:
        if c.status != Status.ok.value or c.ms is None or not c.hash:
            continue
        res = result_of(c)
        progs.append(Program(id=c.id, round=c.round, hash=c.hash, parent=c.parent, features=c.features,
                             detected=_detected(deps, deps.source(c.hash), res), ms=c.ms, lo=c.lo, hi=c.hi,
                             pct_sol=c.pct_sol if c.pct_sol is not None else _pct(res), profile=c.profile,
                             bottleneck=c.bottleneck, tuned=c.tuned))
    db.add(progs)
    return len(db)


def choose_parents(deps: Any, state: GraphState, round_: int, n: int) -> list[dict[str, Any]]:
    """Per slot: the parent (id, ms, kind, why) and the ids of its inspirations, from the archive of the
    rounds before this one."""
    lim = Limits(**state.get("limits", {}))
    best = BestSummary(**state.get("best", {}))
    programs = archive(deps, state).all(before_round=round_)
    by_id = {p.id: p for p in programs}
    out = []
    for ch in parents_mod.assign_parents(programs, best.id, n, margin=lim.stone_margin, round_=round_):
        prog = by_id.get(ch.parent)
        insp = parents_mod.inspirations(programs, ch.parent, lim.inspirations, best_ms=best.ms)
        out.append({"parent": ch.parent, "parent_ms": prog.ms if prog is not None else best.ms, "kind": ch.kind,
                    "why": ch.why, "inspirations": [p.id for p in insp],
                    "features": list(prog.features) if prog is not None else list(best.features)})
    return out


def parent_role(kind: str, why: str = "") -> str:
    """Why the coder is shown its parent: the best, a stepping stone, or another approach's best (and why)."""
    role = PARENT_ROLE.get(kind, "the kernel to improve on")
    return f"{role} ({why})" if why and kind != parents_mod.BEST else role
