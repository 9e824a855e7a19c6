"""One candidate whole, read from its run directory: source, diff against its parent, the LLM exchanges that
produced it (and the critic's on it), compile log, per-case results, timing samples, profile and diagnosis.

`cuda-llm show RUN CANDIDATE` prints it; the HTML report and `report --json` embed it for every candidate.
Held-out shapes stay redacted: per-case text comes only from the one failure formatter
(tools/harness/failure_text.py), which names a held-out case by its kind of failure and nothing else.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from cuda_llm.runs.replay import replay_line
from cuda_llm.runs.rundir import read_json
from cuda_llm.tools.harness import failure_text
from cuda_llm.agents.context import make_diff
from cuda_llm.report.formats import feature_text, fmt_ms, fmt_pct, fmt_x, render_table
from cuda_llm.report.profile_table import profile_tables, roofline_line
from cuda_llm.runs.trace import read_trace
from cuda_llm.tasks import load_task

_CID = re.compile(r"^r(\d+)c(\d+)(?:f(\d+))?$")
SEED = "seed"     # the kernel of optimize --start-from


class Exchange(BaseModel):
    name: str                      # role-label[-n], e.g. coder-r2c1
    role: str
    prompt: str = ""
    answer: str = ""


class CandidateView(BaseModel):
    id: str
    round: int = 0
    parent: str | None = None
    features: list[str] = Field(default_factory=list)      # asked for by the planner
    detected: list[str] | None = None                      # found new over its parent when measured (the credit)
    absent: list[str] = Field(default_factory=list)         # asked for, not detected
    final_ms: float | None = None                           # the final re-check's time, for the run's best
    repair_of: str | None = None
    status: str = "not_run"
    median_ms: float | None = None
    speedup: float | None = None           # over the naive baseline
    note: str = ""
    source: str = ""
    diff: str = ""
    exchanges: list[Exchange] = Field(default_factory=list)
    compile_log: str = ""
    cases: list[str] = Field(default_factory=list)     # one line each; held-out cases redacted
    failure: str = ""                                   # the repair text (failure_text.describe, full)
    timing: dict[str, Any] = Field(default_factory=dict)
    profile: dict[str, Any] = Field(default_factory=dict)
    diagnosis: dict[str, Any] = Field(default_factory=dict)
    critique: str = ""                                  # the critic's words on this candidate, a sentence a line
    replay: str = ""                                    # a run installed by `cuda-llm demo`: what it replays


def candidate_rows(rundir: Any, values: dict[str, Any]) -> list[dict[str, Any]]:
    """Every candidate of the run as state knew it: finished rounds from rounds/r<N>/candidates.json, the round in
    progress from the checkpoint's state."""
    rows: list[dict[str, Any]] = []
    n = int(values.get("round") or 0)
    for r in range(1, n + 1):
        data = read_json(Path(rundir.root) / "rounds" / f"r{r}" / "candidates.json")
        if data is None and r == n:
            data = [{"id": cid, **c} for cid, c in sorted((values.get("cands") or {}).items())]
        rows += [dict(c) for c in data or []]
    return rows


def _cases(res: Any) -> list[str]:
    lines: list[str] = []
    for label, v in (("tests", res.validation), ("fresh inputs after timing", res.revalidation)):
        if v is None:
            continue
        shown = [c for c in v.cases if not c.held_out]
        for c in shown:
            lines.append(f"{label}: {'pass' if c.passed else 'FAIL'} {failure_text.case_where(c)}"
                         + ("" if c.passed else f": {failure_text.case_failure(c)}"))
        held = [c for c in v.cases if c.held_out]
        if held:
            bad = next((c for c in held if not c.passed), None)
            lines.append(f"{label}: held-out shapes: " + ("passed" if bad is None else failure_text.case_failure(bad)))
    return lines


def _parent_source(rundir: Any, parent: str | None, task_folder: Path | None) -> str | None:
    if parent and parent != "baseline":
        p = Path(rundir.root) / "candidates" / f"{parent}.cu"
        return p.read_text() if p.is_file() else None
    if task_folder is not None and (task_folder / "naive.cu").is_file():
        return (task_folder / "naive.cu").read_text()
    return None


def task_folder(rundir: Any) -> Path | None:
    """The run's task folder (None when the task cannot be found any more)."""
    try:
        task = rundir.load_config().get("task")

        return Path(load_task(str(task)).task.folder)
    except Exception:  # noqa: BLE001 - a moved or broken task: the view goes on without the naive source
        return None


def _critique(rundir: Any, cid: str) -> str:
    for ev in reversed(read_trace(rundir.trace_path)):
        if ev.get("event") == "decision" and ev.get("kind") == "critique" and ev.get("candidate") == cid:
            return "\n".join(critique_lines(ev.get("bottleneck"), ev.get("summary"), ev.get("next_features")))
    return ""


_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z(`'\"])")


def critique_lines(bottleneck: Any, summary: Any, next_features: Any) -> list[str]:
    """The critic's verdict a sentence a line: the bottleneck with the first sentence, the others, then what
    to try next (run together they read as "...unused Next: vector_loads")."""
    sentences = [s.strip() for s in _SENTENCE_END.split(str(summary or "").strip()) if s.strip()]
    sentences = [s if s[-1] in ".!?;:" else s + "." for s in sentences]
    first = f"{bottleneck}: {sentences[0]}" if bottleneck and sentences else (str(bottleneck or "") or
                                                                               (sentences[0] if sentences else ""))
    lines = [first, *sentences[1:]] if first else sentences[1:]
    nxt = ", ".join(str(f) for f in next_features or [])
    return [*lines, f"Next: {nxt}."] if nxt else lines


def known_ids(rundir: Any, values: dict[str, Any]) -> list[str]:
    seed = [SEED] if Path(rundir.candidate_path(SEED)).is_file() else []
    return ["baseline", *seed] + [str(c["id"]) for c in candidate_rows(rundir, values)]


def candidate_view(rundir: Any, values: dict[str, Any], cid: str, *, folder: Path | None = None,
                   rows: list[dict[str, Any]] | None = None) -> CandidateView:
    """Everything about ``cid`` (or "baseline"); KeyError naming the known ids when there is no such candidate."""
    rows = candidate_rows(rundir, values) if rows is None else rows
    row = next((c for c in rows if c.get("id") == cid), None)
    if row is None and cid == SEED and Path(rundir.candidate_path(SEED)).is_file():   # optimize --start-from
        seed_res = rundir.read_result(SEED)
        row = {"id": SEED, "parent": "baseline", "status": seed_res.status.value if seed_res else "not_run",
               "ms": seed_res.median_ms if seed_res else None}
    if row is None and cid != "baseline":
        ids = known_ids(rundir, values)
        raise KeyError(f"no candidate {cid!r} in run {rundir.run_id}; its candidates are: "
                       f"{', '.join(ids) if len(ids) > 1 else 'baseline (no round has run)'}")
    row = row or {"id": "baseline", "status": (values.get("baseline") or {}).get("status", "not_run"),
                  "ms": (values.get("baseline") or {}).get("ms")}
    base_ms = (values.get("baseline") or {}).get("ms")
    m = _CID.match(cid)
    view = CandidateView(id=cid, round=int(m.group(1)) if m else 0, parent=row.get("parent") if cid != "baseline" else None,
                         features=list(row.get("features") or []), repair_of=row.get("repair_of"),
                         status=str(row.get("status") or "not_run"), median_ms=row.get("ms"),
                         speedup=(base_ms / row["ms"]) if base_ms and row.get("ms") else None,
                         note=str(row.get("note") or ""))
    folder = folder if folder is not None else task_folder(rundir)
    src = Path(rundir.root) / "candidates" / f"{cid}.cu"
    if src.is_file():
        view.source = src.read_text()
    elif cid == "baseline" and folder is not None and (folder / "naive.cu").is_file():
        view.source = (folder / "naive.cu").read_text()
    if cid != "baseline" and view.source:
        parent_src = _parent_source(rundir, view.parent, folder)
        view.diff = make_diff(parent_src, view.source, parent=view.parent or "baseline", child=cid) if parent_src else ""
    for name, prompt, answer in rundir.exchanges(cid):
        view.exchanges.append(Exchange(name=name, role=name.split("-", 1)[0],
                                       prompt=prompt.read_text() if prompt else "", answer=answer.read_text() if answer else ""))
    log = Path(rundir.root) / "candidates" / f"{cid}.compile.log"
    view.compile_log = log.read_text() if log.is_file() else ""
    res = rundir.read_result(cid)
    if res is not None:
        view.cases = _cases(res)
        view.failure = "" if res.status.passed else failure_text.describe(res, full=True)
        if res.timing is not None:
            view.timing = res.timing.model_dump(mode="json", include={"median_ms", "min_ms", "mean_ms", "iqr_ms", "rse",
                                                                      "samples_ms", "repetitions", "stop_reason",
                                                                      "sol_ms", "pct_of_sol", "sol_basis",
                                                                      "suspect_reason"})
    prof = read_json(Path(rundir.root) / "profiles" / f"{cid}.json") or {}
    view.profile = {k: v for k, v in (prof.get("profile") or {}).items() if k in ("available", "reason", "kernels",
                                                                                   "duration_ms", "metrics")}
    if prof.get("roofline"):
        view.profile["roofline"] = prof["roofline"]
    view.diagnosis = prof.get("diagnosis") or {}
    view.critique = _critique(rundir, cid)
    credit = next((e for e in read_trace(rundir.trace_path) if e.get("event") == "credit" and e.get("candidate") == cid),
                  None)
    if credit is not None:
        view.detected, view.absent = list(credit.get("credited") or []), list(credit.get("absent") or [])
    final = values.get("final") or {}
    if final.get("candidate") == cid and final.get("ms") is not None:
        view.final_ms = final["ms"]
    view.replay = replay_line(rundir)
    return view


SECTIONS = ("prompt", "answer", "source", "diff", "compile", "cases", "failure", "timings", "profile", "diagnosis",
            "critic")
SAMPLES_PER_LINE = 10


def timing_summary(t: dict[str, Any]) -> str:
    """The timing in a few lines: the figures and how many samples, never the samples themselves (hundreds
    of them: `show --section timings` lists them)."""
    body = (f"median {fmt_ms(t.get('median_ms'))} ms, min {fmt_ms(t.get('min_ms'))}, iqr {fmt_ms(t.get('iqr_ms'))}, "
            f"{t.get('repetitions')} repetitions ({t.get('stop_reason')})")
    if t.get("pct_of_sol") is not None:
        body += f"; {fmt_pct(t['pct_of_sol'])}% of speed of light" + (f"\n{t['sol_basis']}" if t.get("sol_basis") else "")
    samples = [float(x) for x in t.get("samples_ms") or []]
    if samples:
        body += (f"\n{len(samples)} samples, {fmt_ms(min(samples))} to {fmt_ms(max(samples))} ms "
                 f"(every one: --section timings)")
    return body


def samples_text(samples: list[float]) -> str:
    """Every timing sample, SAMPLES_PER_LINE a line, in the one millisecond format."""
    cells = [fmt_ms(float(x)) for x in samples]
    return "\n".join(", ".join(cells[i:i + SAMPLES_PER_LINE]) for i in range(0, len(cells), SAMPLES_PER_LINE))


def text_sections(v: CandidateView, *, full_timings: bool = False) -> list[tuple[str, str, str]]:
    """(name, title, body) of every section `show` prints, in the order a person reads them; ``name`` is
    what `show --section` takes. ``full_timings`` adds every sample to the timing section."""
    out: list[tuple[str, str, str]] = []

    def section(name: str, title: str, body: str) -> None:
        if body.strip():
            out.append((name, title, body.rstrip()))

    for ex in v.exchanges:
        section("prompt", f"prompt ({ex.name})", ex.prompt)
        section("answer", f"answer ({ex.name})", ex.answer)
    section("source", "source", v.source)
    section("diff", f"diff against {v.parent or 'baseline'}", v.diff)
    section("compile", "compile log", v.compile_log)
    section("cases", "per-case results (held-out shapes redacted)", "\n".join(v.cases))
    section("failure", "what failed", v.failure)
    if v.timing:
        body = timing_summary(v.timing)
        if full_timings and v.timing.get("samples_ms"):
            body = body.replace(" (every one: --section timings)", "") + "\nsamples (ms, in the order timed):\n" + \
                samples_text(v.timing["samples_ms"])
        section("timings", "timing", body)
    if v.profile:
        headline, headers, rows = profile_tables(v.profile)
        body_lines = [headline] + ([render_table(headers, rows, align="l" * len(headers))] if rows else [])
        roof = roofline_line(v.profile.get("roofline"))
        section("profile", "profile", "\n".join(body_lines + ([f"roofline: {roof}"] if roof else [])))
    if v.diagnosis:
        d = v.diagnosis
        ev = "\n".join(f"- {e}" for e in d.get("evidence") or [])
        section("diagnosis", "diagnosis", f"{d.get('bottleneck')}: {d.get('summary') or ''}\n{ev}\nsuggested: "
                f"{', '.join(d.get('suggested_features') or []) or '-'}")
    section("critic", "critic", v.critique)
    return out


def candidate_features(v: CandidateView) -> str:
    """The features line of one candidate (the baseline has none)."""
    return "-" if v.id == "baseline" else feature_text(v.features, v.detected, v.absent)


def header_text(v: CandidateView) -> str:
    head = [f"{v.replay}\n"] if v.replay else []
    head += [f"candidate {v.id}" + (f" (round {v.round})" if v.round else ""),
             f"status:    {v.status}" + (f", {fmt_ms(v.median_ms)} ms in its round, {fmt_x(v.speedup)} over the "
                                         f"baseline" if v.median_ms is not None else "") + (f": {v.note}" if v.note else ""),
             f"parent:    {v.parent or '-'}" + (f" (repair of {v.repair_of})" if v.repair_of else ""),
             f"features:  {candidate_features(v)}"]
    if v.final_ms is not None:
        head.insert(-2, f"final:     {fmt_ms(v.final_ms)} ms at the final re-check (the run's best; the report's headline)")
    return "\n".join(head)


def render_text(v: CandidateView, section: str | None = None) -> str:
    """`cuda-llm show`: the header and every section, or one section's body alone (``section``, one of
    SECTIONS: every sample in the timings section); ValueError names the sections it has."""
    if section is None:
        parts = [header_text(v)] + [f"== {title}\n{body}" for _, title, body in text_sections(v)]
        names = sorted({name for name, _, _ in text_sections(v)}, key=SECTIONS.index)
        parts.append(f"(one section alone: --section {'|'.join(names)})")
        return "\n\n".join(parts) + "\n"
    if section not in SECTIONS:
        raise ValueError(f"no section {section!r}; sections: {', '.join(SECTIONS)}")
    got = [(title, body) for name, title, body in text_sections(v, full_timings=True) if name == section]
    if not got:
        have = [name for name in SECTIONS if any(n == name for n, _, _ in text_sections(v))]
        raise ValueError(f"candidate {v.id} has no {section} section; it has: {', '.join(have) or 'none'}")
    if len(got) == 1:
        return got[0][1] + "\n"
    return "\n\n".join(f"== {title}\n{body}" for title, body in got) + "\n"
