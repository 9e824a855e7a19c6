"""The one formatter of failure text: what the CLI, the trace, the history, the report and every prompt
say about a candidate that failed.

Held-out shapes never leave the harness. For a held-out case this module gives the kind of failure and
nothing else: no sizes, no element counts, no indices, no values, and no count of held-out cases. For a
shown shape it gives everything that helps a fix (sizes, the first bad index, expected and got).
Every caller that turns a result into words goes through here; nothing else formats a CaseResult.
"""

from __future__ import annotations

from typing import Iterable

from cuda_llm.results import CaseResult, EvalResult, Status, ValidationResult

# CaseResult.kind -> what a held-out failure may say (also the fallback wording for shown shapes)
KIND_TEXT: dict[str, str] = {
    "wrong_values": "outputs outside the tolerance",
    "unwritten": "outputs never written (the poison value survived)",
    "nonfinite": "NaN or Inf where the reference is finite",
    "input_modified": "an input buffer was modified (inputs are read-only)",
    "overrun": "a store past the end of a buffer",
    "size": "an output of the wrong size",
    "cuda_error": "a CUDA error (fault or failed launch)",
    "replay": "outputs that do not match the current inputs (a result computed for other inputs)",
    "worker_exit": "the candidate ended the worker process (exit, abort or a crash)",
}
HELD_OUT = "a held-out shape"


def case_where(case: CaseResult) -> str:
    """Where a case ran: its sizes, or only that it was held out."""
    if case.held_out:
        return HELD_OUT
    return "sizes " + ", ".join(f"{k}={v}" for k, v in case.sizes.items())


def case_failure(case: CaseResult, *, detail: bool = True) -> str:
    """One failing case in words. Held out: the kind only. Shown: sizes, reason and, with ``detail``,
    the first bad element."""
    if case.held_out:
        scale = f" with {case.scale}" if case.scale else ""
        return f"{HELD_OUT}{scale}: {KIND_TEXT.get(case.kind or '', 'wrong result')}"
    text = f"{case_where(case)}: {case.reason or KIND_TEXT.get(case.kind or '', 'wrong result')}"
    if detail and case.first_bad_index is not None and case.expected is not None:
        text += (f" (first bad element at index {case.first_bad_index}: expected {_num(case.expected)}, "
                 f"got {_num(case.got)})")
    return text


def shown_count(cases: Iterable[CaseResult]) -> tuple[int, int]:
    """(passed, total) over the shown cases only: held-out cases are never counted in words."""
    shown = [c for c in cases if not c.held_out]
    return sum(c.passed for c in shown), len(shown)


def passed_text(n_shown: int, any_held_out: bool) -> str:
    """The headline of a pass: the shown cases by number, the held-out ones only by name."""
    held = " and every held-out shape" if any_held_out else ""
    return f"passed {n_shown}/{n_shown} shown cases{held}"


def validation_failure(v: ValidationResult, label: str) -> str:
    """``label: failed on <case>`` with how many shown cases passed (never how many were held out)."""
    bad = v.first_failure()
    if bad is None:
        return f"{label}: not every case ran"
    ok, total = shown_count(v.cases)
    before = f" ({ok} of the {total} shown cases that ran passed)" if total else ""
    return f"{label}: failed on {case_failure(bad)}{before}."


def describe(res: EvalResult, *, full: bool = False) -> str:
    """What went wrong (or the headline when nothing did). ``full`` adds what a repair needs: every static
    issue, the condensed compiler errors and the first failing case of each validation."""
    if res.status.passed or not full:
        return res.message or res.status.value
    lines = [f"status: {res.status.value}"]
    lines += [f"- [{i.rule}] {i.message}" + (f" (line {i.line})" if i.line else "") for i in res.static_issues[:8]]
    if res.compile is not None and not res.compile.ok:
        lines.append(res.compile.errors or res.compile.log[-2000:])
    for label, v in (("correctness", res.validation), ("fresh inputs after timing", res.revalidation)):
        if v is not None and not v.passed and v.first_failure() is not None:
            case = v.first_failure()
            assert case is not None
            text = f"{label}: first failing case: {case_failure(case)}"
            if not case.held_out and case.max_abs_err is not None:
                text += f"; max abs err {case.max_abs_err:.3g}"
            lines.append(text)
    if res.message and res.message not in "\n".join(lines):
        lines.append(res.message)
    return "\n".join(lines)


def note(res: EvalResult, limit: int = 160) -> str:
    """One line for the state, the trace, the history and tables."""
    if res.status == Status.compile_error and res.compile is not None:
        first = next((ln for ln in (res.compile.errors or res.message).splitlines() if ln.strip()), "")
        text = "compile error: " + first
    elif res.status == Status.static_error and res.static_issues:
        text = "refused: " + "; ".join(i.message for i in res.static_issues[:2])
    elif res.status == Status.wrong_answer and (bad := _first_bad(res)) is not None:
        text = "wrong answer at " + case_failure(bad, detail=False)
    else:
        text = res.message or res.status.value
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _first_bad(res: EvalResult) -> CaseResult | None:
    for v in (res.validation, res.revalidation):
        if v is not None and (bad := v.first_failure()) is not None:
            return bad
    return None


def _num(x: float | None) -> str:
    """NaN and Inf may arrive as None (JSON has no NaN); say NaN rather than fail to format."""
    return "NaN" if x is None else f"{x:.6g}"
