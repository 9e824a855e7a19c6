"""The morning report as one self-contained HTML file (runs/<id>/report.html), and its data for scripts.

Everything is inside the file: the styles, the Plotly library (its basic bundle, vendor/plotly-basic.min.js,
inlined so the page opens with no network and stays near 1.3 MB), the plot data, and every candidate's code, diff, prompts, answers, results, profile and diagnosis, each
behind a click (<details>). The plot comes from Plotly: latency per round, every candidate by status (those
with no time, such as wrong answers, on a row of their own above the others) and the best so far, against
the naive baseline, the library and the speed-of-light bound. The candidate tree hangs each
candidate under its parent (a repair under the candidate it repairs). A run whose answers came from a
scripted model (tests, benchmarks) says so at the top, and so does a replay (`cuda-llm demo`).
"""

from __future__ import annotations

import functools
import html
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from cuda_llm.report.candidate_view import (
    SEED, CandidateView, candidate_features, candidate_rows, candidate_view, samples_text, task_folder, timing_summary,
)
from cuda_llm.report.formats import FEATURES_LEGEND, fmt_duration, fmt_ms, fmt_tokens, fmt_x
from cuda_llm.report.markdown import RunSummary, _headline
from cuda_llm.results import NAIVE_BASELINE
from cuda_llm.report.profile_table import profile_tables, roofline_line
from cuda_llm.runs.trace import read_trace

PASSED = ("ok", "suspect")
PLOTLY_JS = Path(__file__).resolve().parent / "vendor" / "plotly-basic.min.js"
NOT_TIMED_ABOVE = 1.8      # the row of candidates with no time: this factor above the slowest line of the plot
STATUS_COLORS = {"ok": "#1a7f37", "suspect": "#9a6700", "wrong_answer": "#cf222e", "compile_error": "#8250df",
                 "static_error": "#8250df", "runtime_error": "#cf222e", "timeout": "#cf222e", "no_code": "#6e7781",
                 "rejected": "#9a6700", "no_device": "#6e7781", "not_run": "#6e7781"}


class ReportData(BaseModel):
    """What the HTML report shows, and `report --json` prints."""

    summary: RunSummary
    state: str = ""                       # running, finished, stopped ... (runs/run_info)
    models: dict[str, str] = Field(default_factory=dict)      # role -> model that answered
    scripted: bool = False                # the answers came from a scripted model, not an LLM
    sol_ms: float | None = None           # the best kernel's speed-of-light bound at the benchmark shape
    sol_basis: str = ""                   # its sentence: which unit the bound assumes and why
    round_best: dict[int, float | None] = Field(default_factory=dict)
    candidates: list[CandidateView] = Field(default_factory=list)

    def for_json(self) -> dict[str, Any]:
        """The report for scripts: the summary and each candidate's numbers (the long texts stay in the files)."""
        heavy = {"source", "diff", "exchanges", "compile_log", "failure"}
        return {"summary": self.summary.model_dump(mode="json") | {"best_speedup": self.summary.best_speedup},
                "state": self.state, "models": self.models, "scripted": self.scripted, "sol_ms": self.sol_ms,
                "sol_basis": self.sol_basis,
                "round_best": self.round_best,
                "candidates": [c.model_dump(mode="json", exclude=heavy) | {"exchanges": [e.name for e in c.exchanges]}
                               for c in self.candidates]}


def _models(rundir: Any, events: list[dict[str, Any]]) -> dict[str, str]:
    seen: dict[str, str] = {}
    for ev in events:
        if ev.get("event") == "llm_call" and ev.get("role") and ev.get("model"):
            seen.setdefault(str(ev["role"]), str(ev["model"]))
    if not seen:
        try:
            llm = rundir.load_config().get("llm") or {}
            seen = {role: str(v.get("model")) for role, v in llm.items() if isinstance(v, dict) and v.get("model")}
        except (OSError, ValueError):
            pass
    return seen


def bound_shown(views: list[CandidateView], summary: RunSummary) -> tuple[float | None, str]:
    """The speed of light the report draws and its sentence: the bound of the kernel the % refers to (the
    best), not the first timed one's: a tensor-core best has the tensor-core bound, and the plot must not
    draw an FFMA baseline's fp32 line under it."""
    best_id = summary.best_candidate or "baseline"
    bounded = [v for v in views if v.timing.get("sol_ms")]
    shown = next((v for v in bounded if v.id == best_id), bounded[0] if bounded else None)
    if shown is None:
        return None, ""
    if shown.id == summary.best_candidate and summary.best_sol_ms and summary.best_sol_basis:
        # the headline's bound (the final re-check's): the line, its label and its sentence all one figure
        return summary.best_sol_ms, summary.best_sol_basis
    return shown.timing.get("sol_ms"), shown.timing.get("sol_basis") or ""


def build_report_data(rundir: Any, values: dict[str, Any], summary: RunSummary, state: str = "") -> ReportData:
    events = read_trace(rundir.trace_path)
    models = _models(rundir, events)
    scripted = any("scripted" in m.lower() for m in models.values())
    folder = task_folder(rundir)
    rows = candidate_rows(rundir, values)
    views = [candidate_view(rundir, values, "baseline", folder=folder, rows=rows)]
    if Path(rundir.candidate_path(SEED)).is_file():
        views.append(candidate_view(rundir, values, SEED, folder=folder, rows=rows))
    views += [candidate_view(rundir, values, str(r["id"]), folder=folder, rows=rows) for r in rows]
    sol, basis = bound_shown(views, summary)
    round_best = {int(ev["round"]): ev.get("best_ms") for ev in events
                  if ev.get("event") == "round_end" and isinstance(ev.get("round"), int)}
    return ReportData(summary=summary, state=state, models=models, scripted=scripted, sol_ms=sol, sol_basis=basis,
                      round_best=round_best, candidates=views)


# ------------------------------------------------------------------------------------------- plot
def _wrap(text: str, width: int = 110) -> str:
    """A long sentence in plotly's <br>-separated lines (hover text and subtitles do not wrap)."""
    import textwrap

    return "<br>".join(html.escape(line) for line in textwrap.wrap(text, width))


def latency_figure(data: ReportData) -> Any:
    """Latency per round: every candidate by status (timed ones at their median; those with no time, such as a
    wrong answer or a compile error, on a "not timed" row above the rest), the best so far, and the yardsticks."""
    import plotly.graph_objects as go

    s = data.summary
    fig = go.Figure()
    cands = [c for c in data.candidates if c.id != "baseline"]
    timed = [c for c in cands if c.median_ms is not None]
    untimed = [c for c in cands if c.median_ms is None]
    for status in sorted({c.status for c in timed}):
        cs = [c for c in timed if c.status == status]
        fig.add_trace(go.Scatter(
            x=[c.round for c in cs], y=[c.median_ms for c in cs], mode="markers", name=f"candidates: {status}",
            marker=dict(size=10, color=STATUS_COLORS.get(status, "#6e7781"), opacity=0.8),
            text=[f"{c.id} ({candidate_features(c)})<br>{fmt_ms(c.median_ms)} ms in its round" for c in cs],
            hovertemplate="%{text}<extra></extra>"))
    rounds = sorted(data.round_best)
    if rounds:
        ys = [s.baseline_ms, *[data.round_best[r] for r in rounds]]
        fig.add_trace(go.Scatter(x=[0, *rounds], y=ys, text=[f"{fmt_ms(y)} ms" for y in ys],
                                 mode="lines+markers", name="best so far", line=dict(color="#0969da", width=3),
                                 hovertemplate="round %{x}: best %{text}<extra></extra>"))
    last = max([*rounds, *(c.round for c in cands), 1])
    lines = [(label, ms, dash) for label, ms, dash in ((f"{s.baseline_label} baseline", s.baseline_ms, "dash"),
                                                       (s.library_label, s.library_ms, "dot"),
                                                       ("speed of light", data.sol_ms, "dashdot")) if ms]
    for label, ms, dash in lines:   # lines as traces, not shapes: shape annotations land off-scale on a log axis
        why = f"<br>{_wrap(data.sol_basis)}" if label == "speed of light" and data.sol_basis else ""
        fig.add_trace(go.Scatter(x=[0, last], y=[ms, ms], mode="lines", name=f"{label} {fmt_ms(ms)} ms",
                                 line=dict(color="#57606a", dash=dash, width=1.5),
                                 hovertemplate=f"{label}: {fmt_ms(ms)} ms{why}<extra></extra>"))
    if untimed:
        top = NOT_TIMED_ABOVE * max([c.median_ms for c in timed] + [ms for _, ms, _ in lines] + [1e-3])
        for status in sorted({c.status for c in untimed}):
            cs = [c for c in untimed if c.status == status]
            fig.add_trace(go.Scatter(
                x=[c.round + _spread(c, untimed) for c in cs], y=[top] * len(cs), mode="markers",
                name=f"{status} (not timed)",
                marker=dict(size=11, symbol="x", color=STATUS_COLORS.get(status, "#6e7781")),
                text=[f"{c.id} ({candidate_features(c)}): {_short(c.note) or status}" for c in cs],
                hovertemplate="%{text}<extra></extra>"))
        fig.add_annotation(x=0, y=math.log10(top), text="not timed", showarrow=False, xanchor="left", yanchor="bottom",
                           font=dict(color="#57606a", size=11))
    title = "Latency per round (lower is better)"
    if data.sol_ms and data.sol_basis:   # one short line: the bound's whole sentence is under the plot, where
        # it wraps with the page; as a subtitle of three lines it ran into the axis
        title += f"<br><sup>dash-dot line: speed of light {fmt_ms(data.sol_ms)} ms (why: under the plot)</sup>"
    fig.update_layout(title=dict(text=title, y=0.96, yanchor="top"), xaxis_title="round", yaxis_title="median ms",
                      yaxis_type="log", yaxis_tickformat="~g", yaxis_dtick="D2", template="plotly_white", height=480,
                      margin=dict(l=60, r=20, t=90, b=50),
                      legend=dict(orientation="h", y=-0.2))
    fig.update_xaxes(dtick=1)
    return fig


def _spread(c: CandidateView, row: list[CandidateView], step: float = 0.07) -> float:
    """A small offset along the round axis, so that several untimed candidates of one round stay apart."""
    same = [x.id for x in row if x.round == c.round]
    return step * (same.index(c.id) - (len(same) - 1) / 2)


NOTE_CHARS = 120     # a note longer than this is cut in the tree's label and shown whole in the candidate's body


def _short(text: str, limit: int = 100) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


@functools.lru_cache(maxsize=1)
def plotly_js() -> str:
    """The basic plotly.js bundle (scatter is all the report draws), inlined so the page needs no network."""
    return PLOTLY_JS.read_text()


# ------------------------------------------------------------------------------------------- HTML
def _e(text: Any) -> str:
    return html.escape(str(text if text is not None else ""))


def _pre(title: str, body: str, cls: str = "") -> str:
    if not (body or "").strip():
        return ""
    return f'<details class="part {cls}"><summary>{_e(title)}</summary><pre>{_e(body)}</pre></details>'


def _candidate_body(c: CandidateView) -> str:
    parts = [_pre("note", c.note, "note")] if len(c.note) > NOTE_CHARS else []      # the label shows it cut
    parts += [_pre("source", c.source, "source"), _pre(f"diff against {c.parent or 'baseline'}", c.diff, "diff")]
    for ex in c.exchanges:
        parts.append(_pre(f"prompt ({ex.name})", ex.prompt, "prompt"))
        parts.append(_pre(f"answer ({ex.name})", ex.answer, "answer"))
    parts.append(_pre("compile log", c.compile_log))
    parts.append(_pre("per-case results (held-out shapes redacted)", "\n".join(c.cases)))
    parts.append(_pre("what failed", c.failure))
    if c.timing:
        t = c.timing
        body = timing_summary(t).replace(" (every one: --section timings)", "")
        if t.get("samples_ms"):
            body += "\nsamples (ms, in the order timed):\n" + samples_text(t["samples_ms"])
        parts.append(_pre("timing", body))
    if c.profile:
        parts.append(_profile_html(c.profile))
    if c.diagnosis:
        d = c.diagnosis
        ev = "\n".join(f"- {x}" for x in d.get("evidence") or [])
        parts.append(_pre("diagnosis", f"{d.get('bottleneck')}: {d.get('summary') or ''}\n{ev}"))
    if c.critique:
        parts.append(f'<div class="critic"><b>critic:</b>{_lines(c.critique)}</div>')
    return "".join(parts)


def _lines(text: str) -> str:
    """Text kept a line a line (the critic's sentences)."""
    return "".join(f"<div>{_e(line)}</div>" for line in text.splitlines() if line.strip())


def _profile_html(record: dict[str, Any]) -> str:
    """The profile as a table (a row per metric, a column per kernel, units in the cells) and the roofline."""
    headline, headers, rows = profile_tables(record)
    table = ""
    if rows:
        head = "".join(f"<th>{_e(h)}</th>" for h in headers)
        body = "".join("<tr>" + "".join(f"<td>{_e(v)}</td>" for v in row) + "</tr>" for row in rows)
        table = f'<table class="prof"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    roof = roofline_line(record.get("roofline"))
    roof_html = f"<p>roofline: {_e(roof)}</p>" if roof else ""
    return (f'<details class="part profile"><summary>profile (Nsight Compute)</summary><p>{_e(headline)}</p>'
            f"{table}{roof_html}</details>")


def _node_label(c: CandidateView, best: str | None, baseline: str = NAIVE_BASELINE) -> str:
    color = STATUS_COLORS.get(c.status, "#6e7781")
    ms = f"{fmt_ms(c.median_ms)} ms, {fmt_x(c.speedup)}" if c.median_ms is not None else ""
    star = ' <span class="best">best</span>' if c.id == best else ""
    feats = baseline if c.id == "baseline" else candidate_features(c)
    note = f' <span class="note">{_e(_short(c.note, NOTE_CHARS))}</span>' if c.note and c.status not in PASSED else ""
    return (f'<b>{_e(c.id)}</b>{star} <span class="status" style="background:{color}">{_e(c.status)}</span> '
            f'<span class="feat">{_e(feats)}</span> <span class="ms">{_e(ms)}</span>{note}')


def candidate_tree(data: ReportData) -> str:
    """Nested lists: each candidate under its parent (a repair under the candidate it repairs)."""
    ids = {c.id for c in data.candidates}
    children: dict[str, list[CandidateView]] = {}
    for c in data.candidates:
        if c.id == "baseline":
            continue
        up = c.repair_of if c.repair_of in ids else (c.parent if c.parent in ids else "baseline")
        children.setdefault(up, []).append(c)
    by_id = {c.id: c for c in data.candidates}
    best = data.summary.best_candidate

    def node(cid: str, depth: int) -> str:
        c = by_id[cid]
        kids = "".join(node(k.id, depth + 1) for k in children.get(cid, []))
        return (f'<li data-candidate="{_e(cid)}"><details class="cand" id="cand-{_e(cid)}"><summary>'
                f'{_node_label(c, best, data.summary.baseline_label)}</summary>{_candidate_body(c)}</details>'
                + (f"<ul>{kids}</ul>" if kids else "") + "</li>")

    return f'<ul id="tree">{node("baseline", 0)}</ul>' if "baseline" in by_id else '<p>No candidate.</p>'


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1200px;color:#1f2328;padding:0 16px}
h1{font-size:1.5em} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #d0d7de;padding-bottom:4px}
table.head td{padding:2px 12px 2px 0;vertical-align:top} table.head td:first-child{font-weight:600;white-space:nowrap}
.banner{background:#fff8c5;border:1px solid #d4a72c;padding:8px 12px;border-radius:6px;margin:12px 0}
#tree,#tree ul{list-style:none;padding-left:22px;border-left:1px dotted #d0d7de} #tree{padding-left:0;border:0}
#tree li{margin:4px 0} details.cand>summary{cursor:pointer} .status{color:#fff;border-radius:10px;padding:0 8px;font-size:.85em}
.best{background:#0969da;color:#fff;border-radius:10px;padding:0 8px;font-size:.85em} .feat{color:#57606a} .ms{font-variant-numeric:tabular-nums}
.note{color:#cf222e;font-size:.85em} details.part{margin:4px 0 4px 16px} details.part>summary{cursor:pointer;color:#0969da}
pre{background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:8px;overflow:auto;max-height:480px;font-size:12px}
.critic{margin-left:16px} .critic>div{margin:2px 0 2px 12px} table.tok td{padding:2px 16px 2px 0}
table.prof{border-collapse:collapse;font-size:12px;margin:4px 0} table.prof th,table.prof td{border:1px solid #d0d7de;padding:2px 8px;text-align:left}
table.prof td:not(:first-child){font-variant-numeric:tabular-nums} table.prof th{background:#f6f8fa}
ul.critics>li{margin:6px 0} ul.critics>li>div{margin-left:16px} p.caption{color:#57606a;font-size:.9em;margin-top:0}
"""


def render_html(data: ReportData) -> str:
    s = data.summary
    fig = latency_figure(data)
    plot = fig.to_html(full_html=False, include_plotlyjs=False, div_id="latency-plot",
                       config={"displaylogo": False, "responsive": True})
    head = "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in _headline(s) if k != "Replay")
    if data.state:
        head += f"<tr><td>State</td><td>{_e(data.state)}</td></tr>"
    if data.models:
        head += f"<tr><td>Models</td><td>{_e(', '.join(f'{r}: {m}' for r, m in sorted(data.models.items())))}</td></tr>"
    banner = ('<div class="banner" id="scripted">These figures come from a <b>scripted model</b> (canned answers for '
              'tests and benchmarks), not from an LLM.</div>') if data.scripted else ""
    if s.replay:
        banner += f'<div class="banner" id="replay">{_e(s.replay)}</div>'

    tok = "".join(f"<tr><td>{_e(r)}</td><td>{n:,}</td></tr>" for r, n in sorted(s.tokens_by_role.items()))
    total = sum(s.tokens_by_role.values())
    critic = [c for c in data.candidates if c.critique]
    critic_html = "".join(f"<li><b>{_e(c.id)}</b>{_lines(c.critique)}</li>" for c in critic) or "<li>none</li>"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cuda-llm {_e(s.run_id)}: {_e(s.task)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style>
<script>{plotly_js()}</script></head>
<body>
<h1>cuda-llm run {_e(s.run_id)}: {_e(s.task)}</h1>
{banner}
<table class="head">{head}</table>
<h2>Latency per round</h2>
{plot}
{f'<p class="caption" id="sol-basis">{_e(data.sol_basis)}</p>' if data.sol_ms and data.sol_basis else ""}
<h2>Candidates</h2>
<p>Each candidate under its parent (a repair under the candidate it repairs), with its time in its round.
Click one for its code, diff, prompts and answers, results, profile and diagnosis. {_e(FEATURES_LEGEND)}.</p>
{candidate_tree(data)}
<h2>What the critic said</h2>
<ul class="critics">{critic_html}</ul>
<h2>LLM usage</h2>
<table class="tok">{tok}<tr><td><b>total</b></td><td><b>{total:,}</b> ({fmt_tokens(total)}) in {fmt_duration(s.seconds)}</td></tr></table>
</body></html>
"""


def write_html(rundir: Any, data: ReportData) -> Path:
    return Path(rundir.write_text("report.html", render_html(data)))
