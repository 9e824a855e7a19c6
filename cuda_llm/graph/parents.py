"""Where each round's candidates start from: parents and inspirations drawn from the program database.

A greedy hill-climb builds every candidate on the current best and throws away a correct kernel that
is 1% slower but uses a feature the best lacks (a TMA pipeline, say), which is often the better base for
the next step. Here, in the manner of OpenEvolve's program database (MAP-Elites over feature niches):

- the **best** (the confirmed best of the run) is the parent of half the slots, rounded up;
- **stepping stones**: programs within ``margin`` (3%) of the best that carry a feature the best lacks,
  fastest first, take the other slots;
- then the **elites of other niches**: a niche (MAP-Elites cell) is the set of catalogue features found
  in a kernel; its elite is its fastest program; only strong ones count (within ``STRONG_FACTOR`` of the
  best's time);
- with one candidate per round, every third round builds on the first alternative, if there is one.

Each coder may also be shown ``k`` inspirations: elites of niches other than its parent's, fastest
first (a different approach that scored well). Pure functions of the archive: the same archive gives
the same choices, so a resumed run chooses as the uninterrupted one did.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from cuda_llm.graph.program_db import Program

STRONG_FACTOR = 1.5       # an elite of another niche is offered if it is within 1.5x of the best's time
EXPLORE_EVERY = 3         # with one candidate per round: every third round builds on an alternative

BEST, STONE, ELITE = "best", "stepping stone", "niche elite"


class ParentChoice(BaseModel):
    slot: int
    parent: str
    kind: str                  # best, stepping stone, niche elite
    why: str = ""


def _by_id(programs: Sequence[Program]) -> dict[str, Program]:
    return {p.id: p for p in programs}


def _fastest_first(programs: Sequence[Program]) -> list[Program]:
    return sorted(programs, key=lambda p: (p.ms, p.round, p.id))


def stepping_stones(programs: Sequence[Program], best: Program, margin: float) -> list[Program]:
    """Programs within ``margin`` of the best's time that carry a feature the best lacks, fastest first."""
    have = set(best.detected)
    out = [p for p in programs
           if p.id != best.id and p.ms <= best.ms * (1 + margin) and set(p.detected) - have]
    return _fastest_first(out)


def niche_elites(programs: Sequence[Program], *, exclude_niches: Sequence[str] = (),
                 best_ms: float | None = None, strong: float = STRONG_FACTOR) -> list[Program]:
    """The fastest program of every niche not excluded (within ``strong`` x ``best_ms``), fastest first."""
    elites: dict[str, Program] = {}
    for p in _fastest_first(programs):
        if p.niche in exclude_niches or p.niche in elites:
            continue
        elites[p.niche] = p
    out = list(elites.values())
    if best_ms is not None:
        out = [p for p in out if p.ms <= best_ms * strong]
    return _fastest_first(out)


def _new_features(p: Program, best: Program) -> str:
    extra = sorted(set(p.detected) - set(best.detected))
    return ", ".join(extra) or "none"


def assign_parents(programs: Sequence[Program], best_id: str, n: int, *, margin: float = 0.03,
                   round_: int = 1) -> list[ParentChoice]:
    """One parent per slot (see the module docstring). Without the best in the archive: the best for all."""
    best = _by_id(programs).get(best_id)
    if best is None:
        return [ParentChoice(slot=i, parent=best_id, kind=BEST, why="the run's best") for i in range(n)]
    alternatives: list[ParentChoice] = []
    for p in stepping_stones(programs, best, margin):
        pct = 100 * (p.ms / best.ms - 1)
        alternatives.append(ParentChoice(slot=-1, parent=p.id, kind=STONE,
                                         why=f"{pct:.1f}% slower than the best; uses {_new_features(p, best)}, "
                                             f"which the best lacks"))
    taken = {a.parent for a in alternatives}
    for p in niche_elites(programs, exclude_niches=[best.niche], best_ms=best.ms):
        if p.id in taken:
            continue
        alternatives.append(ParentChoice(slot=-1, parent=p.id, kind=ELITE,
                                         why=f"the fastest kernel with features [{p.niche}] "
                                             f"({p.ms / best.ms:.2f}x the best's time)"))
    n_alt = n // 2 if n > 1 else (1 if round_ % EXPLORE_EVERY == 0 else 0)
    chosen = alternatives[:n_alt]
    out: list[ParentChoice] = []
    alt = iter(chosen)
    for slot in range(n):
        pick = next(alt, None) if slot % 2 == 1 or n == 1 else None
        if pick is None:
            out.append(ParentChoice(slot=slot, parent=best.id, kind=BEST, why="the run's best"))
        else:
            out.append(pick.model_copy(update={"slot": slot}))
    return out


def inspirations(programs: Sequence[Program], parent_id: str, k: int, *, best_ms: float | None = None) -> list[Program]:
    """Up to ``k`` strong elites of niches other than the parent's (a different approach that scored well)."""
    if k <= 0:
        return []
    parent = _by_id(programs).get(parent_id)
    exclude = [parent.niche] if parent is not None else []
    return [p for p in niche_elites(programs, exclude_niches=exclude, best_ms=best_ms) if p.id != parent_id][:k]
