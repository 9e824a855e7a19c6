"""KernelBench's table for a batch of PyTorch module problems: per problem correct or not (with the stage that
failed), the best kernel's time, PyTorch eager and torch.compile timed beside it on the same GPU (the run's
final check: one job on one GPU), the speedup over each; over the batch fast_p (correct and more than p times
faster, KernelBench's measure) at p = 0, 1, 1.5, 2 over eager and over compile, the geometric mean speedups,
and the problems refused at import with the importer's reasons.

fast_p's denominator is every problem the batch ran (refused ones are counted apart, as KernelBench has no
such case); the geometric means are over the correct problems. Rows are read from each run's folder
(read-only): values of its checkpoint, its candidates' results, the final check's gpu_job event.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from cuda_llm.report.formats import fmt_ms, fmt_x, md_table

P_VALUES = (0.0, 1.0, 1.5, 2.0)
# the stages a candidate goes through, in order: a problem without a correct kernel failed at the furthest one
# any of its candidates reached
STAGES = ("static_error", "compile_error", "runtime_error", "timeout", "wrong_answer", "ok")
HEADERS = ("level", "file", "correct", "failing stage", "best ms", "eager ms", "compile ms", "x eager", "x compile",
           "GPU", "round 1 ms", "after round 1", "rounds", "status")


class KbRow(BaseModel):
    task: str
    level: int | None = None
    file: str = ""
    status: str = ""                 # the batch's: finished, waiting, refused, ...
    detail: str = ""
    correct: bool = False
    stage: str = ""                  # the failing stage when not correct ("refused at import", "not run", ...)
    best_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    gpu: str | None = None           # the GPU of the final check (kernel, eager and compile timed there)
    same_gpu: bool = False           # eager and compile from the final check, beside the kernel
    rounds: int = 0
    round1_ms: float | None = None   # round 1's best passing time (what the later rounds added)
    bottleneck: str = ""             # the best kernel's diagnosis (the run's report): why it is not faster

    @property
    def after_round1(self) -> float | None:
        """Round 1's best over the final best: what the rounds after the first added (1.00x: nothing)."""
        return self.round1_ms / self.best_ms if self.correct and self.round1_ms and self.best_ms else None

    @property
    def x_eager(self) -> float | None:
        return self.eager_ms / self.best_ms if self.correct and self.eager_ms and self.best_ms else None

    @property
    def x_compile(self) -> float | None:
        return self.compile_ms / self.best_ms if self.correct and self.compile_ms and self.best_ms else None


class KbSummary(BaseModel):
    problems: int                    # run (not refused)
    correct: int
    refused: int
    refused_reasons: dict[str, str] = Field(default_factory=dict)   # file -> the importer's reason
    fast_eager: dict[str, float] = Field(default_factory=dict)      # "1.0" -> share
    fast_compile: dict[str, float] = Field(default_factory=dict)
    geomean_eager: float | None = None
    geomean_compile: float | None = None
    manual_coder: bool = False


def level_and_file(ref: str) -> tuple[int | None, str]:
    p = Path(ref)
    m = re.fullmatch(r"level(\d+)", p.parent.name)
    return (int(m.group(1)) if m else None), p.name


def _stage(run_root: Path) -> str:
    """The furthest stage any candidate reached, as the failing stage (no candidate: "no candidate")."""
    best = -1
    for f in (Path(run_root) / "candidates").glob("*.json"):
        if f.name.startswith(("baseline", "final")) or "-confirm" in f.name or "-h2h" in f.name:
            continue
        try:
            status = json.loads(f.read_text()).get("status", "")
        except (OSError, ValueError):
            continue
        if status in STAGES:
            best = max(best, STAGES.index(status))
    return STAGES[best] if best >= 0 else "no candidate"


def _final_gpu(run_root: Path) -> str | None:
    """The GPU of the run's final check, from its trace."""
    path = Path(run_root) / "trace.jsonl"
    gpu = None
    try:
        with open(path) as f:
            for line in f:
                if '"gpu_job"' in line and '"final' in line:
                    ev = json.loads(line)
                    if ev.get("status") == "done" and str(ev.get("kind", "")).startswith("final"):
                        gpu = str(ev.get("gpu"))
    except (OSError, ValueError):
        return gpu
    return gpu


def _round1_ms(run_root: Path) -> float | None:
    """Round 1's best passing time, from its candidates' results (r1c*.json)."""
    times = []
    for f in (Path(run_root) / "candidates").glob("r1c*.json"):
        if "-" in f.stem:
            continue
        try:
            r = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        t = (r.get("timing") or {}).get("median_ms")
        if r.get("status") == "ok" and t:
            times.append(float(t))
    return min(times) if times else None


def kb_row(task: Any, values: dict[str, Any] | None, run_root: Path | None) -> KbRow:
    """One problem's row from its batch task, its run's checkpoint values and its folder."""
    level, file = level_and_file(task.ref)
    row = KbRow(task=task.name, level=level, file=file, status=task.status, detail=task.detail)
    if task.status == "refused":
        return row.model_copy(update={"stage": "refused at import"})
    if not values or run_root is None:
        return row.model_copy(update={"stage": task.status})
    base, final, best = values.get("baseline") or {}, values.get("final") or {}, values.get("best") or {}
    rounds = int(values.get("round") or 0)
    upd: dict[str, Any] = {"rounds": rounds, "round1_ms": _round1_ms(run_root),
                           "bottleneck": "; ".join(x for x in (best.get("bottleneck"), best.get("profile"))
                                                   if x and x != "unknown")[:300]}
    kernel = best.get("id") not in (None, "baseline")
    if not kernel:           # no candidate passed: the furthest stage any reached
        upd.update(stage=_stage(run_root), eager_ms=base.get("ms"), compile_ms=base.get("library_ms"))
    elif final.get("status") == "ok" and final.get("ms"):
        upd.update(correct=True, best_ms=final["ms"], eager_ms=final.get("baseline_ms"),
                   compile_ms=final.get("library_ms") or base.get("library_ms"), gpu=_final_gpu(run_root),
                   same_gpu=final.get("library_ms") is not None)
    elif final:              # the best failed its final check (fresh inputs)
        upd.update(stage=f"final check: {final.get('status')}", eager_ms=base.get("ms"),
                   compile_ms=base.get("library_ms"))
    elif best.get("ms"):     # not finished yet (waiting for its next round): the best so far, timed beside nothing
        upd.update(correct=True, best_ms=best["ms"], eager_ms=base.get("ms"), compile_ms=base.get("library_ms"))
    return row.model_copy(update=upd)


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarize(rows: list[KbRow], manual_coder: bool = False) -> KbSummary:
    ran = [r for r in rows if r.status != "refused"]
    n = len(ran)

    def share(attr: str, p: float) -> float:
        return sum(1 for r in ran if r.correct and (getattr(r, attr) or 0) > p) / n if n else 0.0

    return KbSummary(problems=n, correct=sum(1 for r in ran if r.correct),
                     refused=len(rows) - n, refused_reasons={r.file or r.task: r.detail for r in rows if r.status == "refused"},
                     fast_eager={f"{p:g}": share("x_eager", p) if p else sum(1 for r in ran if r.correct) / max(1, n)
                                 for p in P_VALUES},
                     fast_compile={f"{p:g}": share("x_compile", p) if p else sum(1 for r in ran if r.correct) / max(1, n)
                                   for p in P_VALUES},
                     geomean_eager=_geomean([r.x_eager for r in ran if r.x_eager]),
                     geomean_compile=_geomean([r.x_compile for r in ran if r.x_compile]),
                     manual_coder=manual_coder)


def manual_coder(llm: dict[str, Any]) -> bool:
    return str((llm.get("coder") or {}).get("provider", "")) == "manual"


def _cells(r: KbRow) -> list[str]:
    return [str(r.level) if r.level is not None else "-", r.file or r.task, "yes" if r.correct else "no",
            "" if r.correct else r.stage, fmt_ms(r.best_ms), fmt_ms(r.eager_ms), fmt_ms(r.compile_ms),
            fmt_x(r.x_eager), fmt_x(r.x_compile), (r.gpu or "-") + ("" if r.same_gpu or not r.correct else " *"),
            fmt_ms(r.round1_ms), fmt_x(r.after_round1), str(r.rounds), r.status]


def coder_line(s: KbSummary) -> str:
    return ("The coder was a model playing the manual provider (it answered each pending prompt file alone, "
            "compile checks only, never the GPU); planner: the feature bandit (rules); critic: the rule diagnosis."
            if s.manual_coder else "")


def fast_lines(s: KbSummary) -> list[str]:
    def pct(x: float) -> str:
        return f"{100 * x:.0f}%"

    out = [f"- problems: {s.problems} run, {s.correct} correct; {s.refused} refused at import"]
    out.append("- fast_p over eager:   " + ", ".join(f"fast_{p} {pct(v)}" for p, v in s.fast_eager.items()))
    out.append("- fast_p over compile: " + ", ".join(f"fast_{p} {pct(v)}" for p, v in s.fast_compile.items()))
    out.append(f"- geometric mean speedup over eager {fmt_x(s.geomean_eager)}, over torch.compile "
               f"{fmt_x(s.geomean_compile)} (over the correct problems)")
    for f, why in s.refused_reasons.items():
        out.append(f"- refused at import: {f}: {why}")
    return out


def lost_lines(rows: list[KbRow]) -> list[str]:
    """The problems whose best kernel lost to torch.compile, with the reason the run's report gives."""
    return [f"- {r.file or r.task}: {fmt_x(r.x_compile)} torch.compile; {r.bottleneck or 'no diagnosis recorded'}"
            for r in rows if r.x_compile is not None and r.x_compile < 1.0]


def markdown(rows: list[KbRow], s: KbSummary) -> str:
    note = coder_line(s)
    lost = lost_lines(rows)
    return ("## KernelBench\n\n" + (f"> {note}\n\n" if note else "") + "\n".join(fast_lines(s)) + "\n\n"
            + md_table(HEADERS, [_cells(r) for r in rows])
            + ("\n\nLost to torch.compile (the best kernel's diagnosis):\n\n" + "\n".join(lost) if lost else "")
            + "\n\nfast_p: the share of the problems run that are correct and more than p times faster (fast_0: "
              "correct). Eager and torch.compile are timed in the run's final check, in the same job on the same "
              "GPU as the kernel (torch.compile's warm-up outside the timing); `*`: the final check did not time "
              "torch.compile, its figure is the run's first baseline, from whichever GPU measured it.\n")


def as_json(rows: list[KbRow], s: KbSummary) -> str:
    return json.dumps({"summary": s.model_dump(), "problems": [{**r.model_dump(), "x_eager": r.x_eager,
                                                                 "x_compile": r.x_compile,
                                                                 "after_round1": r.after_round1} for r in rows]},
                      indent=1)


def sorted_speedup_figure(rows: list[KbRow]) -> Any:
    """Each problem's speedup over torch.compile, sorted (one point per problem; failures at 0), 1.0 marked."""
    # local: plotly is slow to import and only the page needs it
    import plotly.graph_objects as go

    pts = sorted(((r.x_compile or 0.0), r.file or r.task) for r in rows if r.status != "refused")
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=list(range(1, len(pts) + 1)), y=[y for y, _ in pts], mode="markers+lines",
                             text=[n for _, n in pts], name="speedup over torch.compile",
                             hovertemplate="%{text}: %{y:.2f}x<extra></extra>", marker_color="#8250df"))
    fig.add_hline(y=1.0, line_dash="dash", line_color="#cf222e", annotation_text="1.0 (torch.compile)")
    fig.update_layout(title="Speedup over torch.compile per problem, sorted (0: no correct kernel)",
                      xaxis_title="problems, sorted", yaxis_title="x torch.compile", template="plotly_white",
                      height=380, margin=dict(l=60, r=20, t=60, b=50))
    return fig
