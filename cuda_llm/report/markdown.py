"""The end of a run for people: report.md in the run directory and the table printed on the console.

Pure formatting of a RunSummary (built by the graph from its state and the run directory), so the same
summary always gives the same report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from cuda_llm.report.formats import (
    FEATURES_LEGEND, feature_text, fmt_duration, fmt_ms, fmt_pct, fmt_x, md_cell, md_table, one_line, render_table,
)
from cuda_llm.results import NAIVE_BASELINE, speedup

PASSED_STATUSES = ("ok", "suspect")  # passed every test (suspect timings never win)


class CandidateSummary(BaseModel):
    id: str
    parent: str | None = None
    features: list[str] = Field(default_factory=list)
    status: str
    median_ms: float | None = None
    speedup: float | None = None          # over the naive baseline
    message: str = ""
    detected: list[str] | None = None     # found new over its parent when measured (the trace's credit); None: not recorded
    absent: list[str] = Field(default_factory=list)   # asked for, not detected


class RoundSummary(BaseModel):
    index: int
    candidates: list[CandidateSummary] = Field(default_factory=list)
    best_ms: float | None = None          # best-so-far after this round, when known
    note: str = ""                        # e.g. "repair 1", "no candidate passed"


class RunSummary(BaseModel):
    task: str
    run_id: str
    device: str | None = None
    baseline_ms: float | None = None
    best_candidate: str | None = None
    best_ms: float | None = None
    stop_reason: str | None = None
    rounds: list[RoundSummary] = Field(default_factory=list)
    tokens_by_role: dict[str, int] = Field(default_factory=dict)
    seconds: float = 0.0
    best_pct_of_sol: float | None = None  # 100 * speed-of-light ms / best ms
    best_sol_ms: float | None = None      # the best kernel's one bound (speed_of_light.bound)
    best_sol_basis: str = ""              # its sentence: which unit it assumes and why
    library_ms: float | None = None       # vendor-library baseline (torch.compile for a PyTorch task), when measured
    baseline_label: str = NAIVE_BASELINE  # what speedup 1.0 is: "naive", or "PyTorch eager"
    library_label: str = "library"        # the yardstick: "library", or "torch.compile"
    best_profile: str = ""                # the best kernel's profile in one line (bottleneck and evidence)
    best_bottleneck: str = ""             # the one bottleneck: the diagnosis of the best kernel's profile
    task_bound: str = ""                  # what the task declares it expects (task.toml), before any kernel ran
    sol_limiter: str = ""                 # which roof the speed-of-light bound is (memory or compute)
    best_round_ms: float | None = None    # the best kernel's time in its round (the candidate table's figure)
    final_ms: float | None = None         # its time at the final re-check (fresh inputs, beside the baseline)
    final_check: str = ""                 # outcome of the final re-validation and timing
    best_path: str | None = None
    state: str = ""                       # running, stopped... when known (a running run is not resumed)
    replay: str = ""                      # a recorded run installed by `cuda-llm demo`: what it replays

    @property
    def best_speedup(self) -> float | None:
        return speedup(self.baseline_ms, self.best_ms)

    @property
    def n_candidates(self) -> int:
        return sum(len(r.candidates) for r in self.rounds)

    @property
    def n_passed(self) -> int:
        return sum(c.status in PASSED_STATUSES for r in self.rounds for c in r.candidates)


def _candidate_rows(summary: RunSummary, *, markdown: bool) -> list[list[str]]:
    rows = []
    for r in summary.rounds:
        for c in r.candidates:
            is_best = c.id == summary.best_candidate
            cid = (f"**{c.id}**" if markdown else f"{c.id} *") if is_best else c.id
            # report.md keeps the whole note (a Markdown cell wraps); the console's table cuts it to a line
            note = " ".join(c.message.split()) if markdown else one_line(c.message)
            rows.append([str(r.index), cid, c.parent or "-", feature_text(c.features, c.detected, c.absent), c.status,
                         fmt_ms(c.median_ms), fmt_x(c.speedup), note])
    return rows


def sol_text(pct: float | None, sol_ms: float | None, basis: str | None, where: str = "") -> str:
    """'36.9% of the bound (0.2927 ms). Speed of light 0.2927 ms: ...': a % of speed of light is never shown
    without the one sentence that says which unit the bound assumes."""
    if pct is None:
        return "-"
    text = f"{fmt_pct(pct)}% of the bound" + (f" ({fmt_ms(sol_ms)} ms{where})" if sol_ms else "")
    return text + (f". {basis}" if basis else "")


def measured_where(summary: RunSummary) -> str:
    """Which measurement the headline's best time is: the final re-check, when it ran, which differs from the
    candidate table's figure (its round's timing) by the noise of a second session."""
    if summary.final_ms is None or summary.best_ms != summary.final_ms:
        return " (its round's timing)" if summary.best_candidate else ""
    if summary.best_round_ms is None:
        return " (the final re-check)"
    return (f" (the final re-check, on fresh inputs beside the baseline; its round's timing, the table's figure: "
            f"{fmt_ms(summary.best_round_ms)} ms)")


def bottleneck_text(summary: RunSummary) -> str:
    """The one bottleneck (the diagnosis of the best kernel's profile), with the other two views named as what
    they are, so that three different words read as three different questions."""
    text = f"{summary.best_bottleneck} (the diagnosis of {summary.best_candidate}'s Nsight Compute profile)"
    others = []
    if summary.task_bound:
        others.append(f"the task declares itself {summary.task_bound}-bound (its expectation, before any kernel ran)")
    if summary.sol_limiter:
        others.append(f"its speed-of-light bound is the {summary.sol_limiter} roof (the lower of the two roofs for "
                      f"the units its code uses: where the limit is, not what holds the kernel back)")
    return text + ("; " + "; ".join(others) if others else "")


def _headline(summary: RunSummary) -> list[tuple[str, str]]:
    best = summary.best_candidate or "none (no candidate beat the baseline)"
    items = [("Replay", summary.replay)] if summary.replay else []
    items += [
        ("Task", summary.task),
        ("Run", summary.run_id),
        ("Device", summary.device or "unknown"),
        ("Stop reason", summary.stop_reason
         or (f"not finished: running now (watch it with `cuda-llm trace {summary.run_id} --follow`)"
             if summary.state == "running" else f"not finished (continue with `cuda-llm resume {summary.run_id}`)")),
        (f"Baseline ({summary.baseline_label})", f"{fmt_ms(summary.baseline_ms)} ms"),
        ("Best", f"{best}: {fmt_ms(summary.best_ms)} ms, {fmt_x(summary.best_speedup)} over "
                 + ("the baseline" if summary.baseline_label == NAIVE_BASELINE else summary.baseline_label)
                 + measured_where(summary)),
        ("Speed of light", sol_text(summary.best_pct_of_sol, summary.best_sol_ms, summary.best_sol_basis,
                                    " at the final re-check's measured peaks" if summary.final_ms is not None else "")),
    ]
    if summary.best_bottleneck:
        items.append(("Bottleneck", bottleneck_text(summary)))
    if summary.library_ms is not None:
        lib = f"{fmt_ms(summary.library_ms)} ms"
        if summary.best_ms:
            lib += (f" (best is {summary.library_ms / summary.best_ms:.2f}x the library's speed)"
                    if summary.library_label == "library"
                    else f" (best: {fmt_x(summary.library_ms / summary.best_ms)} over {summary.library_label})")
        items.append(("Library baseline" if summary.library_label == "library" else summary.library_label, lib))
    if summary.best_profile:
        items.append(("Best's profile", summary.best_profile.removeprefix(f"{summary.best_bottleneck}: ")
                      if summary.best_bottleneck else summary.best_profile))
    if summary.final_check:
        items.append(("Final check", summary.final_check))
    items.append(("Candidates", f"{summary.n_candidates} in {len(summary.rounds)} round(s), {summary.n_passed} passed"))
    items.append(("Time", fmt_duration(summary.seconds)))
    return items


def _tokens_rows(summary: RunSummary) -> list[list[str]]:
    rows = [[role, f"{n:,}"] for role, n in sorted(summary.tokens_by_role.items())]
    if rows:
        rows.append(["total", f"{sum(summary.tokens_by_role.values()):,}"])
    return rows


CANDIDATE_HEADERS = ["round", "candidate", "parent", "features", "status", "median ms", "speedup", "note"]


def render_report(summary: RunSummary) -> str:
    """report.md as text."""
    parts = [f"# cuda-llm run {summary.run_id}: {summary.task}", ""]
    parts += [f"- **{k}**: {md_cell(v)}" for k, v in _headline(summary)]
    if summary.best_path:
        parts.append(f"- **Best kernel**: `{summary.best_path}`")
    parts += ["", "## Candidates", ""]
    rows = _candidate_rows(summary, markdown=True)
    parts.append(md_table(CANDIDATE_HEADERS, rows) if rows else "No candidate was evaluated.")
    if rows:
        parts += ["", f"median ms: each candidate's timing in its round; {FEATURES_LEGEND}."]
    notes = [f"- round {r.index}: {r.note}" for r in summary.rounds if r.note]
    if notes:
        parts += ["", "Round notes:", ""] + notes
    parts += ["", "## LLM usage (tokens)", ""]
    tok = _tokens_rows(summary)
    parts.append(md_table(["role", "tokens"], tok) if tok else "No LLM calls.")
    parts += ["", "Trace: `trace.jsonl` (one JSON event per line); prompts and answers: `prompts/`, `answers/`; one candidate whole: `cuda-llm show RUN CANDIDATE`.", ""]
    return "\n".join(parts)


def write_report(rundir: Any, summary: RunSummary) -> Path:
    """Write report.md into the run directory (atomically) and return its path."""
    return Path(rundir.write_text("report.md", render_report(summary)))


def final_table(summary: RunSummary) -> str:
    """The console summary at the end of a run: headline, candidate table, tokens."""
    head = "\n".join(f"{k + ':':18} {v}" for k, v in _headline(summary))
    rows = _candidate_rows(summary, markdown=False)
    table = render_table(CANDIDATE_HEADERS, rows, align="rllllrrl") if rows else "(no candidates)"
    tok = _tokens_rows(summary)
    tokens = ("LLM tokens: " + ", ".join(f"{r[0]} {r[1]}" for r in tok)) if tok else "LLM tokens: none"
    out = [head, "", table, "", tokens]
    if summary.best_candidate:
        out.append("(* = best)" + (f"; best kernel: {summary.best_path}" if summary.best_path else ""))
    return "\n".join(out)
