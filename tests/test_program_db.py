"""The program database (graph/program_db.py) and where parents come from (graph/parents.py)."""

from __future__ import annotations

import sqlite3

from cuda_llm.graph.parents import ELITE, STONE, assign_parents, inspirations, niche_elites, stepping_stones
from cuda_llm.graph.program_db import Program, ProgramDB


def prog(pid: str, ms: float, detected: tuple[str, ...], round_: int = 1) -> Program:
    return Program(id=pid, round=round_, hash=f"h{pid}", ms=ms, detected=list(detected))


# the best uses smem tiling; a TMA kernel 1% slower; a warp-shuffle kernel 20% slower; a slow one
BEST = prog("r2c0", 1.00, ("smem_tiling", "vector_loads"), 2)
TMA = prog("r2c1", 1.01, ("smem_tiling", "tma_bulk_copy"), 2)
SHFL = prog("r1c1", 1.20, ("warp_shuffle",))
SAME_NICHE = prog("r1c0", 1.05, ("smem_tiling", "vector_loads"))
SLOW = prog("baseline", 9.0, (), 0)
ARCHIVE = [BEST, TMA, SHFL, SAME_NICHE, SLOW]


def test_stepping_stones_are_close_to_the_best_and_carry_a_feature_it_lacks():
    assert [p.id for p in stepping_stones(ARCHIVE, BEST, 0.03)] == ["r2c1"]
    assert stepping_stones(ARCHIVE, BEST, 0.005) == []                 # 1% is outside a 0.5% margin
    assert SAME_NICHE not in stepping_stones(ARCHIVE, BEST, 0.10)      # close, but nothing new


def test_niche_elites_are_the_fastest_of_each_other_niche_and_strong():
    elites = niche_elites(ARCHIVE, exclude_niches=[BEST.niche], best_ms=BEST.ms)
    assert [p.id for p in elites] == ["r2c1", "r1c1"]                  # the 9 ms naive kernel is not strong
    assert [p.id for p in niche_elites(ARCHIVE)] == ["r2c0", "r2c1", "r1c1", "baseline"]


def test_half_the_slots_build_on_the_best_and_the_rest_on_stones_then_elites():
    ch = assign_parents(ARCHIVE, "r2c0", 4)
    assert [c.parent for c in ch] == ["r2c0", "r2c1", "r2c0", "r1c1"]
    assert ch[1].kind == STONE and "tma_bulk_copy" in ch[1].why and "1.0% slower" in ch[1].why
    assert ch[3].kind == ELITE and "warp_shuffle" in ch[3].why
    assert [c.parent for c in assign_parents(ARCHIVE, "r2c0", 3)] == ["r2c0", "r2c1", "r2c0"]
    assert [c.parent for c in assign_parents([BEST, SAME_NICHE], "r2c0", 4)] == ["r2c0"] * 4   # one niche only
    # one candidate per round: every third round explores
    assert [assign_parents(ARCHIVE, "r2c0", 1, round_=r)[0].parent for r in (1, 2, 3, 4)] == ["r2c0", "r2c0", "r2c1", "r2c0"]
    # without the best in the archive (a baseline that did not time), every slot gets the best's id
    assert [c.parent for c in assign_parents([], "baseline", 2)] == ["baseline", "baseline"]


def test_inspirations_come_from_other_niches_than_the_parents():
    assert [p.id for p in inspirations(ARCHIVE, "r2c0", 2, best_ms=1.0)] == ["r2c1", "r1c1"]
    assert [p.id for p in inspirations(ARCHIVE, "r2c1", 1, best_ms=1.0)] == ["r2c0"]
    assert inspirations(ARCHIVE, "r2c0", 0) == []


def test_the_archive_persists_upserts_by_id_and_filters_by_round(tmp_path):
    db = ProgramDB(tmp_path / "run" / "programs.sqlite")
    db.add(ARCHIVE)
    db.add(prog("r2c1", 1.01, ("smem_tiling", "tma_bulk_copy"), 2))    # a replayed step writes the same row
    again = ProgramDB(tmp_path / "run" / "programs.sqlite")              # another process opening the file
    assert len(again) == 5
    assert [p.id for p in again.all()] == ["r2c0", "r2c1", "r1c0", "r1c1", "baseline"]
    assert {p.id for p in again.all(before_round=2)} == {"r1c0", "r1c1", "baseline"}
    assert again.get("r2c1").detected == ["smem_tiling", "tma_bulk_copy"] and again.get("nope") is None
    rows = sqlite3.connect(str(tmp_path / "run" / "programs.sqlite")).execute("SELECT COUNT(*) FROM programs").fetchone()
    assert rows[0] == 5
