"""The one failure formatter: shown shapes in full, held-out shapes by the kind of failure only."""

from __future__ import annotations

import re

import pytest

from cuda_llm.results import CaseResult, CompileResult, EvalResult, StaticIssue, Status, ValidationResult
from cuda_llm.tools.harness import failure_text

SHOWN = CaseResult(sizes={"rows": 64, "cols": 1000}, passed=False, kind="nonfinite",
                   reason="y: 1 NaN/Inf values where the reference is finite", first_bad_index=[3, 7], expected=0.5,
                   got=None, max_abs_err=2.0)
HIDDEN = CaseResult(sizes={"rows": 301, "cols": 2049}, held_out=True, passed=False, kind="wrong_values",
                    reason="y: 17 of 616749 elements outside tolerance (atol 1e-05, rtol 1e-05); max abs err 0.3",
                    first_bad_index=[12, 2048], expected=0.125, got=0.5, max_abs_err=0.3, max_rel_err=3.0)


def _leaks(text: str, case: CaseResult) -> list[str]:
    """Every number of a held-out case that appears in ``text`` (sizes, counts, indices, values)."""
    numbers = {str(v) for v in case.sizes.values()} | {"616749", "17", "2048", "0.125", "0.3"}
    return [n for n in numbers if re.search(rf"(?<![\d.]){re.escape(n)}(?![\d.])", text)]


def _wrong(case: CaseResult, *, where: str = "validation") -> EvalResult:
    v = ValidationResult(passed=False, cases=[CaseResult(sizes={"rows": 8, "cols": 8}, passed=True), case])
    msg = failure_text.validation_failure(v, "correctness")
    return EvalResult(task="softmax", candidate="r1c0", source_hash="x", status=Status.wrong_answer, message=msg,
                      **({"validation": v} if where == "validation" else {"revalidation": v}))


def test_a_shown_case_is_described_in_full():
    text = failure_text.case_failure(SHOWN)
    assert "rows=64, cols=1000" in text and "index [3, 7]" in text and "expected 0.5" in text and "got NaN" in text


@pytest.mark.parametrize("where", ["validation", "revalidation"])
def test_a_held_out_case_gives_the_kind_of_failure_and_nothing_else(where):
    res = _wrong(HIDDEN, where=where)
    for text in (res.message, failure_text.note(res), failure_text.describe(res, full=True),
                 failure_text.case_failure(HIDDEN), failure_text.case_where(HIDDEN)):
        assert _leaks(text, HIDDEN) == [], text
        assert "held-out" in text
    assert "outside the tolerance" in failure_text.case_failure(HIDDEN)


def test_counts_name_only_the_shown_cases():
    v = ValidationResult(passed=False, cases=[CaseResult(sizes={"n": 1}, passed=True), SHOWN, HIDDEN])
    msg = failure_text.validation_failure(v, "correctness")
    assert "1 of the 2 shown cases" in msg and "3" not in re.sub(r"\[3, 7\]", "", msg)
    assert failure_text.passed_text(5, True) == "passed 5/5 shown cases and every held-out shape"
    assert failure_text.passed_text(5, False) == "passed 5/5 shown cases"


def test_every_kind_has_held_out_wording():
    for kind in failure_text.KIND_TEXT:
        case = HIDDEN.model_copy(update={"kind": kind})
        assert failure_text.KIND_TEXT[kind] in failure_text.case_failure(case)
    unknown = HIDDEN.model_copy(update={"kind": None})
    assert _leaks(failure_text.case_failure(unknown), HIDDEN) == []


def test_full_description_carries_static_and_compile_errors():
    res = EvalResult(task="t", candidate="c", source_hash="h", status=Status.compile_error, message="compilation failed",
                     static_issues=[StaticIssue(rule="host-trick", message="system() (process creation)", line=4)],
                     compile=CompileResult(ok=False, arch="sm_90", source_hash="h", errors="kernel.cu(3): error: x"))
    full = failure_text.describe(res, full=True)
    assert "[host-trick] system()" in full and "(line 4)" in full and "kernel.cu(3): error: x" in full
    assert failure_text.note(res) == "compile error: kernel.cu(3): error: x"
