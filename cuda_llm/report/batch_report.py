"""A batch's table (console and table.md) and its page (batch.html), from the batch's state and its runs.

One row per task: the baseline (the naive kernel, or PyTorch eager for a PyTorch module), the yardstick (the
library kernel, or torch.compile), the best kernel's latency, its speedup over each, its share of speed of
light, how the task ended and how many rounds it ran. Numbers come from each run's checkpoint (read-only,
safe while the batch runs); the page links each task to its run's own report.html, written next to it.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from cuda_llm.report.formats import fmt_duration, fmt_ms, fmt_x, md_table, one_line, render_table
from cuda_llm.results import NAIVE_BASELINE, baseline_label
from cuda_llm.paths import atomic_write
from cuda_llm.runs.run_info import read_values, run_info
from cuda_llm.runs.rundir import RunDir

HEADERS = ("task", "naive or eager ms", "library or torch.compile ms", "best ms", "speedup", "vs library",
           "% SOL", "status", "rounds")


class BatchRow(BaseModel):
    task: str
    run_id: str | None = None
    baseline_label: str = NAIVE_BASELINE
    baseline_ms: float | None = None
    library_label: str = "library"
    library_ms: float | None = None
    best_id: str | None = None
    best_ms: float | None = None
    pct_sol: float | None = None
    status: str = "pending"
    detail: str = ""
    rounds: int = 0
    scripted: bool = False

    @property
    def speedup(self) -> float | None:
        return self.baseline_ms / self.best_ms if self.baseline_ms and self.best_ms else None

    @property
    def vs_library(self) -> float | None:
        return self.library_ms / self.best_ms if self.library_ms and self.best_ms else None

    def status_text(self) -> str:
        return f"{self.status} ({self.detail})" if self.detail else self.status


def batch_rows(state: Any, runs_dir: Path) -> list[BatchRow]:
    """The rows of a batch (its BatchState) from its runs' checkpoints; a task not started has an empty row."""
    rows = []
    for t in state.tasks:
        row = BatchRow(task=t.name, run_id=t.run_id, status=t.status, detail=one_line(t.detail, 60))
        root = Path(runs_dir) / t.run_id if t.run_id else None
        if root is not None and root.is_dir():
            rundir = RunDir(root)
            values = read_values(rundir)
            info = run_info(rundir)
            if t.status == "running" and info.state != "running":    # the batch was killed with it
                row.status, row.detail = info.state, ""
            base, best, final = values.get("baseline") or {}, values.get("best") or {}, values.get("final") or {}
            best_ms = final.get("ms") or best.get("ms")
            real_best = best.get("id") not in (None, "baseline")
            row = row.model_copy(update=dict(
                baseline_label=baseline_label(base), baseline_ms=base.get("ms"),
                library_label=base.get("library_label") or "library", library_ms=base.get("library_ms"),
                best_id=best.get("id"), best_ms=best_ms if real_best else None,
                pct_sol=(final.get("pct_of_sol") or best.get("pct_sol")) if real_best else None,
                rounds=int(values.get("round") or 0), scripted=_scripted(rundir)))
        rows.append(row)
    return rows


def _scripted(rundir: Any) -> bool:
    """The run's answers came from a scripted model (tests, benchmarks), not an LLM."""
    try:
        llm = rundir.load_config().get("llm") or {}
    except (OSError, ValueError):
        return False
    models = [str(v.get("model", "")) for v in llm.values() if isinstance(v, dict)]
    if any("scripted" in m.lower() for m in models):
        return True
    # local: `cuda-llm --help` loads this module; the trace module pulls rich
    from cuda_llm.runs.trace import read_trace

    try:
        return any(ev.get("event") == "llm_call" and "scripted" in str(ev.get("model", "")).lower()
                   for ev in read_trace(rundir.trace_path))
    except (OSError, ValueError):
        return False


def _cells(r: BatchRow) -> list[str]:
    pct = f"{r.pct_sol:.0f}" if r.pct_sol is not None else "-"
    return [r.task, fmt_ms(r.baseline_ms), fmt_ms(r.library_ms), fmt_ms(r.best_ms), fmt_x(r.speedup),
            fmt_x(r.vs_library), pct, r.status_text(), str(r.rounds)]


def console_table(rows: list[BatchRow]) -> str:
    return render_table(HEADERS, [_cells(r) for r in rows], align="lrrrrrrlr")


def headline(state: Any, rows: list[BatchRow], kb_summary: Any = None) -> list[tuple[str, str]]:
    """The batch's figures. A KernelBench batch has one speedup figure, its table's (eager and torch.compile
    re-timed side by side with the best kernel): the runs' own baselines are another measurement of eager, and
    two geometric means of one quantity on one page would disagree in the last digit."""
    done = sum(1 for r in rows if r.status == "finished")
    faster = [r.speedup for r in rows if r.speedup]
    out = [("Batch", state.batch_id), ("Suite", state.suite),
           ("Tasks", f"{len(rows)} ({done} finished)"),
           ("GPUs", gpus_text_of(state)), ("Tasks at once", str(state.parallel)),
           ("Time", f"{fmt_duration(state.elapsed_s)} of {fmt_duration(state.time_budget_s)}"),
           ("Tokens", f"{sum(t.tokens_used for t in state.tasks):,} of {state.token_budget:,}")]
    roles = roles_text(getattr(state, "llm", None) or {})
    if roles:
        out.append(("Roles", roles))
    if kb_summary is not None:
        out.append(("Geometric mean speedup", f"{fmt_x(kb_summary.geomean_eager)} over eager, "
                    f"{fmt_x(kb_summary.geomean_compile)} over torch.compile (the KernelBench table's: both timed "
                    "beside the best kernel)"))
    elif faster:
        import math

        out.append(("Geometric mean speedup over the baselines",
                    fmt_x(math.exp(sum(math.log(x) for x in faster) / len(faster)))))
    return out


def gpus_text_of(state: Any) -> str:
    """The GPUs the batch measures on now, and those of earlier sessions where they differed (a batch resumed on
    another machine: each row's figures come from one GPU, its GPU column says which)."""
    now = ", ".join(state.gpus) or "-"
    before = [", ".join(g) for g in getattr(state, "gpus_before", []) or [] if g]
    return f"{now} (earlier sessions: {'; '.join(before)})" if before else now


def roles_text(llm: dict[str, Any]) -> str:
    """Who played each role: "coder: manual (a model or a person answering the prompt files), planner: rules"."""
    parts = []
    for role in ("planner", "coder", "critic"):
        r = llm.get(role) or {}
        prov = r.get("provider")
        if not prov:
            continue
        what = {"manual": "manual (answers written to the pending prompt files)", "rules": "rules"}.get(
            prov, f"{prov} {r.get('model') or ''}".strip())
        parts.append(f"{role}: {what}")
    return ", ".join(parts)


def kernelbench(state: Any, runs_dir: Path) -> tuple[list[Any], Any] | None:
    """KernelBench's rows and summary (report/kernelbench_table.py) when the batch's tasks are PyTorch module
    files; None otherwise."""
    # local: only a batch of PyTorch modules has this table
    from cuda_llm.report.kernelbench_table import kb_row, manual_coder, summarize

    if not any(str(t.ref).endswith(".py") for t in state.tasks):
        return None
    rows = []
    for t in state.tasks:
        root = Path(runs_dir) / t.run_id if t.run_id else None
        values = read_values(RunDir(root)) if root is not None and root.is_dir() else None
        rows.append(kb_row(t, values, root))
    return rows, summarize(rows, manual_coder(getattr(state, "llm", None) or {}))


def markdown(state: Any, rows: list[BatchRow], kb_summary: Any = None) -> str:
    note = ("\n> These figures come from a scripted model (canned answers for tests and benchmarks), not from an LLM.\n"
            if any(r.scripted for r in rows) else "")
    head = "\n".join(f"- {k}: {v}" for k, v in headline(state, rows, kb_summary))
    # local: `cuda-llm --help` loads this module; the bounds are needed only when a report is written
    from cuda_llm.tools.bounds.speed_of_light import SOL_NOTE

    return (f"# cuda-llm batch {state.batch_id}\n{note}\n{head}\n\n{md_table(HEADERS, [_cells(r) for r in rows])}\n\n"
            f"{SOL_NOTE}\n\nEach task's run: `cuda-llm report RUN_ID`, `cuda-llm show RUN_ID CANDIDATE`, `cuda-llm trace RUN_ID`.\n")


def _e(text: Any) -> str:
    return html.escape(str(text if text is not None else ""))


def speedup_figure(rows: list[BatchRow]) -> Any:
    """Speedup of each task's best kernel over its baseline and over its yardstick (log scale)."""
    # local: `cuda-llm --help` loads this module; plotly is slow to import and only the page needs it
    import plotly.graph_objects as go

    have = [r for r in rows if r.speedup]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=[r.task for r in have], y=[r.speedup for r in have], name="over naive / eager",
                         marker_color="#0969da", hovertemplate="%{x}: %{y:.2f}x<extra></extra>"))
    lib = [r for r in have if r.vs_library]
    if lib:
        fig.add_trace(go.Bar(x=[r.task for r in lib], y=[r.vs_library for r in lib], name="over library / torch.compile",
                             marker_color="#8250df", hovertemplate="%{x}: %{y:.2f}x<extra></extra>"))
    fig.update_layout(title="Speedup of the best kernel per task (higher is better)", yaxis_type="log", yaxis_tickformat="~g", yaxis_dtick="D2", barmode="group",
                      template="plotly_white", height=420, margin=dict(l=60, r=20, t=60, b=80),
                      legend=dict(orientation="h", y=-0.25))
    return fig


CSS = """body{font-family:system-ui,sans-serif;margin:24px;max-width:1200px;color:#1f2328}
table{border-collapse:collapse;margin:12px 0}td,th{padding:4px 10px;border-bottom:1px solid #d0d7de;text-align:right}
td:first-child,th:first-child,td.l{text-align:left}.banner{background:#fff8c5;border:1px solid #d4a72c;padding:8px;
border-radius:6px}.head td{border:none;text-align:left;padding:2px 16px 2px 0}"""


def _kb_section(kb: tuple[list[Any], Any] | None) -> str:
    if kb is None:
        return ""
    # local: only a batch of PyTorch modules has this table
    from cuda_llm.report.kernelbench_table import HEADERS as KB_HEADERS, _cells, coder_line, fast_lines, \
        sorted_speedup_figure

    rows, summary = kb
    plot = sorted_speedup_figure(rows).to_html(full_html=False, include_plotlyjs=False, div_id="kb-sorted-plot",
                                               config={"displaylogo": False, "responsive": True})
    note = coder_line(summary)
    lines = "".join(f"<li>{_e(x[2:])}</li>" for x in fast_lines(summary))
    th = "".join(f"<th>{_e(h)}</th>" for h in KB_HEADERS)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in _cells(r)) + "</tr>" for r in rows)
    return ('<h2 id="kernelbench">KernelBench</h2>' + (f'<p class="banner" id="coder-note">{_e(note)}</p>' if note else "")
            + f"<ul>{lines}</ul>{plot}<table id=\"kb\"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>")


def render_page(state: Any, rows: list[BatchRow], reports: dict[str, str], kb: tuple[list[Any], Any] | None = None) -> str:
    """The batch page: headline, the plot, the table with each task linked to its run's report."""
    fig = speedup_figure(rows)
    # local: `cuda-llm --help` loads this module; the report writers are needed only when one is written
    from cuda_llm.report.html import plotly_js

    plot = fig.to_html(full_html=False, include_plotlyjs=False, div_id="speedup-plot",
                       config={"displaylogo": False, "responsive": True})
    banner = ('<div class="banner" id="scripted">These figures come from a <b>scripted model</b> (canned answers '
              'for tests and benchmarks), not from an LLM.</div>') if any(r.scripted for r in rows) else ""
    head = "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>"
                   for k, v in headline(state, rows, kb[1] if kb is not None else None))
    body = []
    for r in rows:
        cells = _cells(r)
        link = reports.get(r.task)
        name = f'<a href="{_e(link)}">{_e(r.task)}</a>' if link else _e(r.task)
        run = f'<br><small>{_e(r.run_id)}</small>' if r.run_id else ""
        tds = "".join(f"<td>{_e(c)}</td>" if i != 7 else f'<td class="l">{_e(c)}</td>' for i, c in enumerate(cells[1:], 1))
        body.append(f'<tr id="task-{_e(r.task)}"><td>{name}{run}</td>{tds}</tr>')
    th = "".join(f"<th>{_e(h)}</th>" for h in HEADERS)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cuda-llm batch {_e(state.batch_id)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style>
<script>{plotly_js()}</script></head>
<body>
<h1>cuda-llm batch {_e(state.batch_id)}</h1>
{banner}
<table class="head">{head}</table>
{plot}
{_kb_section(kb)}
<h2>Tasks</h2>
<p>Each task links to its run's report (every candidate's code, prompts, results and profile).</p>
<table id="tasks"><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>
</body></html>
"""


def write_batch_reports(root: Path, state: Any, runs_dir: Path, *, run_pages: bool = True) -> tuple[list[BatchRow], Path, Path]:
    """table.md and batch.html in the batch folder (and each run's report.html, linked from the page)."""
    rows = batch_rows(state, runs_dir)
    reports: dict[str, str] = {}
    for r in rows:
        if r.run_id and run_pages:
            page = _run_page(Path(runs_dir) / r.run_id)
            if page is not None:
                reports[r.task] = Path("..", "..", r.run_id, page.name).as_posix() \
                    if Path(root).parent.parent.resolve() == Path(runs_dir).resolve() else page.resolve().as_uri()
    kb = kernelbench(state, runs_dir)
    text = markdown(state, rows, kb[1] if kb is not None else None)
    if kb is not None:
        # local: only a batch of PyTorch modules has this table
        from cuda_llm.report import kernelbench_table

        text += "\n" + kernelbench_table.markdown(*kb)
        atomic_write(Path(root) / "kernelbench.json", kernelbench_table.as_json(*kb))
    md = atomic_write(Path(root) / "table.md", text)
    page = atomic_write(Path(root) / "batch.html", render_page(state, rows, reports, kb))
    return rows, md, page


def _run_page(root: Path) -> Path | None:
    """The run's report.md and report.html (best effort: a run without a checkpoint has none)."""
    # local: `cuda-llm --help` loads this module; the report writers are needed only when one is written
    from cuda_llm.report.html import build_report_data, write_html
    from cuda_llm.report.markdown import write_report
    from cuda_llm.report.summary import build_summary

    try:
        rundir = RunDir(root)
        values = read_values(rundir)
        if not values:
            return None
        info = run_info(rundir)
        summary = build_summary(rundir, values)
        summary.state = info.state
        write_report(rundir, summary)
        state = f"{info.state}: {info.detail}" if info.detail else info.state
        return Path(write_html(rundir, build_report_data(rundir, values, summary, state)))
    except Exception:  # noqa: BLE001 - the batch page links what it can
        return None
