"""KernelBench's table from rows (pure): fast_p over the problems run, geometric means over the correct ones,
refusals apart, the failing stage of a problem without a correct kernel, the problems lost to compile."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from cuda_llm.report.kernelbench_table import KbRow, _stage, kb_row, lost_lines, markdown, summarize


def _row(file: str, best: float | None, eager: float = 10.0, compile_: float = 5.0, **kw) -> KbRow:
    return KbRow(task=file, level=1, file=file, status=kw.pop("status", "finished"), correct=best is not None,
                 best_ms=best, eager_ms=eager, compile_ms=compile_, **kw)


def test_fast_p_and_geomeans():
    rows = [_row("a.py", 2.0),                 # 5x eager, 2.5x compile
            _row("b.py", 4.0),                 # 2.5x, 1.25x
            _row("c.py", 8.0),                 # 1.25x, 0.625x: lost to compile
            _row("d.py", None, stage="wrong_answer"),
            _row("e.py", None, status="refused", detail="random")]
    s = summarize(rows, manual_coder=True)
    assert (s.problems, s.correct, s.refused) == (4, 3, 1)
    assert s.fast_eager == {"0": 0.75, "1": 0.75, "1.5": 0.5, "2": 0.5}
    assert s.fast_compile == {"0": 0.75, "1": 0.5, "1.5": 0.25, "2": 0.25}
    assert s.geomean_eager == pytest.approx((5 * 2.5 * 1.25) ** (1 / 3))
    assert s.refused_reasons == {"e.py": "random"}
    assert lost_lines(rows) == ["- c.py: 0.62x torch.compile; no diagnosis recorded"]
    md = markdown(rows, s)
    assert "| 1 | d.py | no | wrong_answer |" in md and "manual provider" in md and "Lost to torch.compile" in md


def test_the_failing_stage_is_the_furthest_any_candidate_reached(tmp_path):
    (tmp_path / "candidates").mkdir()
    for cid, status in (("r1c0", "compile_error"), ("r1c1", "wrong_answer"), ("r1c0-confirm", "ok"),
                        ("baseline", "ok"), ("r2c0", "runtime_error")):
        (tmp_path / "candidates" / f"{cid}.json").write_text(json.dumps({"status": status}))
    assert _stage(tmp_path) == "wrong_answer"
    task = SimpleNamespace(name="kb_9_x", ref="kb-runs/kernelbench/level2/9_X.py", status="finished", detail="")
    values = {"baseline": {"ms": 10.0, "library_ms": 5.0}, "best": {"id": "baseline"}, "round": 2,
              "final": {"status": "wrong_answer", "ms": None}}
    row = kb_row(task, values, tmp_path)
    assert (row.level, row.file, row.correct, row.stage) == (2, "9_X.py", False, "wrong_answer")
    assert row.eager_ms == 10.0 and row.x_compile is None
    # a best kernel that fails the final check (fresh inputs) says so
    values = {**values, "best": {"id": "r2c0", "ms": 3.0}, "final": {"status": "wrong_answer", "ms": 3.0}}
    assert kb_row(task, values, tmp_path).stage == "final check: wrong_answer"
