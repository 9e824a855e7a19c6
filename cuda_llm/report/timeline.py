"""A run's trace as a timeline people read: one line per event, seconds since the run started, what
happened in words (who was asked what, which kernel passed how fast, why the best changed, why the run
stopped). Pure formatting of trace events, so `cuda-llm trace` and tests share it.
"""

from __future__ import annotations

import textwrap
from contextvars import ContextVar
from datetime import datetime
from typing import Any, Iterable, Sequence

from cuda_llm.report.formats import fmt_ms, fmt_x, one_line
from cuda_llm.results import baseline_label

NODE_EVENTS = ("node_start", "node_end")   # shown only on request: they double every step
# every event and decision a run writes, each with its own sentence below (tests hold a real run's trace to it)
EVENTS = ("run_start", "run_resume", "run_end", "baseline", "llm_call", "llm_error", "candidate", "compile_fix",
          "evaluation", "credit", "profile", "postmortem", "tune", "gpu_job", "decision", "round_end", "final", "waiting", "error",
          "warning", *NODE_EVENTS)
DECISIONS = ("features", "parents", "plan_adjusted", "selection", "critique", "reject", "repair", "repair_jobs",
             "refine_skipped", "stop", "halt", "gpus", "extend")


def _ms(v: Any) -> str:
    return f"{fmt_ms(v)} ms" if isinstance(v, (int, float)) else "-"


def _x(v: Any) -> str:
    return fmt_x(v) if isinstance(v, (int, float)) else "-"


_FULL: ContextVar[bool] = ContextVar("timeline_full", default=False)   # `trace --full`: no text is cut
WRAP = 120


def _short(text: Any, limit: int = 110) -> str:
    return " ".join(str(text or "").split()) if _FULL.get() else one_line(str(text or ""), limit)


def _when(ev: dict[str, Any]) -> float | None:
    try:
        return datetime.fromisoformat(str(ev.get("timestamp", "")).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _rel(path: Any, root: str | None) -> str:
    text = str(path or "")
    return text[len(root):].lstrip("/") if root and text.startswith(root) else text


def describe(ev: dict[str, Any], root: str | None = None) -> str:
    """What one event says, in one line (without its time); paths relative to the run folder ``root``."""
    kind = ev.get("event", "?")
    if kind == "run_start":
        lim = ev.get("limits") or {}
        gpus = f", GPUs {','.join(ev['gpus'])}" if ev.get("gpus") and len(ev["gpus"]) > 1 else ""
        return (f"{ev.get('task')} on {ev.get('device') or 'no device'} ({ev.get('arch')}{gpus}): up to "
                f"{lim.get('max_rounds')} rounds x {lim.get('n_candidates')} candidates")
    if kind == "gpu_job":
        lost = f" LOST ({_short(ev.get('error'), 70)}; {'re-queued' if ev.get('requeued') else 'given up'})" \
            if ev.get("status") == "lost" else ""
        return (f"GPU {ev.get('gpu')}: {ev.get('kind')} {ev.get('candidate')} {ev.get('seconds', 0):.1f} s "
                f"(queued {ev.get('queued_s', 0):.1f} s){lost}")
    if kind == "run_resume":
        return f"resumed at {', '.join(ev.get('next') or []) or 'the end'} after {ev.get('elapsed_s', 0):.0f} s of work"
    if kind == "run_end":
        how = ("finished: " + str(ev.get("stop_reason"))) if ev.get("finished") else (
            f"halted ({ev['halt']}, resumable)" if ev.get("halt") else
            "stopped by an error: " + _short(ev.get("error"), 80) if ev.get("error") else "stopped (resumable)")
        return f"{how}; best {ev.get('best') or '-'} {_ms(ev.get('best_ms'))}"
    if kind == "baseline":
        return f"{ev.get('which') or baseline_label(ev)} baseline {ev.get('status')} {_ms(ev.get('median_ms'))}"
    if kind == "llm_error":
        return f"{ev.get('role')} {ev.get('candidate') or ''}: call failed ({_short(ev.get('error'), 90)})"
    if kind == "llm_call":
        cached = " (cached)" if ev.get("cached") else ""
        return (f"{ev.get('role')}: {ev.get('input_tokens', 0):,} in / {ev.get('output_tokens', 0):,} out, "
                f"{ev.get('latency_s', 0):.1f} s{cached}  {_rel(ev.get('response'), root)}")
    if kind == "candidate":
        return _candidate(ev)
    if kind == "compile_fix":
        return f"{ev.get('candidate')} {ev.get('status')}, back to the coder: {_short(ev.get('note'), 90)}"
    if kind == "credit":
        return _credit(ev)
    if kind == "tune":
        best = _plain(ev.get("best")) if ev.get("best") else "none"
        return (f"{ev.get('candidate')} tuned: {ev.get('evaluations', 0)} of {ev.get('space', '?')} points, best {best}: "
                f"{_short(ev.get('summary'), 80)}")
    if kind == "waiting":
        return f"waiting for answers: {', '.join(ev.get('prompts') or []) or '-'}"
    if kind == "evaluation":
        over = f" ({_x(ev['speedup_over_parent'])} over parent)" if ev.get("speedup_over_parent") else ""
        cached = " (cached)" if ev.get("cached") else ""
        note = f": {_short(ev['note'], 90)}" if ev.get("note") else ""
        return f"{ev.get('candidate')} {ev.get('status')} {_ms(ev.get('median_ms'))}{over}{cached}{note}"
    if kind == "profile":
        return f"{ev.get('candidate')}: {ev.get('bottleneck')}: {_short(ev.get('summary'), 100)}"
    if kind == "postmortem":
        ratio = f" {ev['ratio']:.2f}x its parent" if isinstance(ev.get("ratio"), (int, float)) else ""
        return f"{ev.get('candidate')} post-mortem ({ev.get('outcome')}{ratio}): {_short(ev.get('cause'), 100)}"
    if kind == "decision":
        return _decision(ev)
    if kind == "round_end":
        return (f"round {ev.get('round')}: best {ev.get('best')} {_ms(ev.get('best_ms'))} ({_x(ev.get('speedup'))}), "
                f"{ev.get('passed')}/{ev.get('candidates')} passed, plateau {ev.get('plateau_count')}, "
                f"{ev.get('tokens', 0):,} tokens")
    if kind == "final":
        return (f"{ev.get('candidate')} re-validated: {ev.get('status')}, {_ms(ev.get('ms'))} vs "
                f"{baseline_label(ev, 'baseline_label')} {_ms(ev.get('baseline_ms'))} ({_x(ev.get('speedup'))})")
    if kind in NODE_EVENTS:
        took = f" {ev['duration_s']:.2f} s" if isinstance(ev.get("duration_s"), (int, float)) else ""
        return f"{ev.get('node')}{took}"
    if kind in ("error", "warning"):
        where = f"{ev['where']}: " if ev.get("where") else ""
        return where + _short(ev.get("error") or ev.get("message") or _plain(ev), 140)
    return _short(_plain({k: v for k, v in ev.items() if k not in ("timestamp", "event")}), 140)


def _plain(value: Any) -> str:
    """Any field as words, never a Python literal: `key value; key value`, lists joined by commas."""
    if isinstance(value, dict):
        return "; ".join(f"{k} {_plain(v)}" for k, v in value.items() if v not in (None, "", [], {}))
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value) or "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _candidate(ev: dict[str, Any]) -> str:
    """A written candidate: where it came from and whether it builds (``builds`` is recorded when the coder's
    compile check ran; a refinement turn is judged by its evaluation)."""
    cid = ev.get("candidate")
    if ev.get("status") == "no_code":
        return f"{cid}: no code from the coder ({_short(ev.get('note'), 90)})"
    feats = ", ".join(ev.get("features") or []) or "-"
    origin = f"turn {ev['turn']} on {ev['refine_of']}" if ev.get("refine_of") else f"parent {ev.get('parent')}"
    repair = f", repair of {ev['repair_of']}" if ev.get("repair_of") else ""
    turns = int(ev.get("fix_turns") or 0)
    fixes = f" after {turns} fix turn{'s' if turns != 1 else ''}" if turns else ""
    if ev.get("builds") is None:   # the final source was not checked before evaluation: that says
        state = f"written{fixes}"
    else:
        state = f"builds{fixes}" if ev["builds"] else f"does not build{fixes}"
    return f"{cid} ({origin}, {feats}{repair}): {state}"


def _credit(ev: dict[str, Any]) -> str:
    """What the feature statistics learned from one measured candidate."""
    credited = ", ".join(ev.get("credited") or []) or "nothing new"
    absent = f"; asked but not found: {', '.join(ev['absent'])}" if ev.get("absent") else ""
    closed = ev.get("headroom_closed")
    gap = f"; closed {closed:.0%} of its parent's gap to speed of light" if isinstance(closed, (int, float)) else ""
    # "detected", as the reports call them: what the detectors found new over the parent, which is credited
    return f"{ev.get('candidate')} detected (credited): {credited}{absent}{gap}"


def _decision(ev: dict[str, Any]) -> str:
    kind = ev.get("kind")
    if kind == "features":
        per = "; ".join(f"{cid} {', '.join(f) or 'free'}" for cid, f in (ev.get("candidates") or {}).items())
        return f"features for round {ev.get('round')} (by {ev.get('by')}): {per}"
    if kind == "not_offered":
        why = "; ".join(f"{f} ({_short(w, 60)})" for f, w in (ev.get("features") or {}).items())
        return f"recommended but not offered to {ev.get('parent')}: {why}"
    if kind == "selection":
        if not ev.get("candidate"):
            return f"best unchanged: {_short(ev.get('why'), 100)}"
        verb = "replaces" if ev.get("replaced") else "does not replace"
        return (f"{ev.get('candidate')} {_ms(ev.get('candidate_ms'))} {verb} {ev.get('best_before')} "
                f"{_ms(ev.get('best_before_ms'))}: {_short(ev.get('why'), 80)}")
    if kind == "critique":
        nxt = ", ".join(ev.get("next_features") or []) or "-"
        who = "rules" if ev.get("rule_based") else "critic"
        return f"{who} on {ev.get('candidate')}: {ev.get('bottleneck')}; next {nxt}: {_short(ev.get('summary'), 80)}"
    if kind == "stop":
        return f"stop: {ev.get('reason')}" + (f" ({_short(ev.get('text'), 100)})" if ev.get("text") else "")
    if kind == "halt":
        return f"halted ({ev.get('reason')}): {_short(ev.get('text'), 100)}; {_short(ev.get('advice'), 100)}"
    if kind == "gpus":
        on = f"batch {ev['batch']}'s resume" if ev.get("batch") else "resume"
        return f"GPUs changed on {on}: --gpus {ev.get('before')} -> {ev.get('after')}"
    if kind == "extend":
        a, b = ev.get("before") or {}, ev.get("after") or {}
        return (f"more budget: rounds {a.get('max_rounds')} -> {b.get('max_rounds')}, time {a.get('time_budget_s')} -> "
                f"{b.get('time_budget_s')} s, tokens {a.get('token_budget')} -> {b.get('token_budget')}")
    if kind == "parents":
        per = "; ".join(f"{cid} from {p.get('parent')} ({p.get('kind')}: {p.get('why')})"
                        for cid, p in (ev.get("candidates") or {}).items())
        return f"parents for round {ev.get('round')}: {_short(per, 120)}"
    if kind == "plan_adjusted":
        return f"plan adjusted: {_short('; '.join(map(str, ev.get('adjustments') or [])), 120)}"
    if kind == "reject":
        return f"{ev.get('candidate')} rejected: {_short(ev.get('reason'), 110)}"
    if kind == "repair":
        return (f"repair attempt {ev.get('attempt')} for {', '.join(ev.get('candidates') or []) or '-'}: "
                f"{_short(ev.get('why'), 80)}")
    if kind == "repair_jobs":
        per = "; ".join(f"{cid} repairs {of}" for cid, of in (ev.get("candidates") or {}).items())
        return f"repair jobs (attempt {ev.get('attempt')}): {per or '-'}"
    if kind == "refine_skipped":
        return f"no more turns on {ev.get('candidate')}: {_short(ev.get('reason'), 100)}"
    rest = {k: v for k, v in ev.items() if k not in ("timestamp", "event", "kind")}
    return f"{kind}: {_short(_plain(rest), 120)}"


def _mentions(ev: dict[str, Any], candidate: str) -> bool:
    if candidate in (ev.get("candidate"), ev.get("best"), ev.get("repair_of"), ev.get("refine_of"),
                     ev.get("best_before")):
        return True
    if str(ev.get("candidate") or "").startswith(candidate + "-"):     # its confirming re-run
        return True
    return candidate in ev["candidates"] if isinstance(ev.get("candidates"), (dict, list)) else False


def select(events: Iterable[dict[str, Any]], *, kinds: Sequence[str] = (), round_: int | None = None,
           candidate: str | None = None, nodes: bool = False) -> list[tuple[int | None, dict[str, Any]]]:
    """The events to show, each with the round it belongs to (rounds are carried forward from the last
    event that named one, so an LLM call belongs to the round being planned or coded)."""
    current: int | None = None
    out = []
    for ev in events:
        if isinstance(ev.get("round"), int):
            current = ev["round"]
        kind = ev.get("event", "")
        if kind in NODE_EVENTS and not nodes:
            continue
        if kinds and kind not in kinds:
            continue
        if round_ is not None and current != round_:
            continue
        if candidate is not None and not _mentions(ev, candidate):
            continue
        out.append((current, ev))
    return out


def render(events: Sequence[dict[str, Any]], root: str | None = None, full: bool = False, **filters: Any) -> str:
    """The timeline: `+seconds  round  event  what happened`, one line per selected event; ``full``: no note,
    summary or error cut, long ones wrapped under the description."""
    start = next((t for t in map(_when, events) if t is not None), None)
    lines = []
    token = _FULL.set(full)
    try:
        for rnd, ev in select(events, **filters):
            t = _when(ev)
            when = (f"+{t - start:.1f}s" if t is not None and start is not None else "").rjust(9)
            kind = ev.get("event", "?") + (f"/{ev['kind']}" if ev.get("event") == "decision" else "")
            line = f"{when}  {'r' + str(rnd) if rnd is not None else '-':>3}  {kind:<19} {describe(ev, root)}"
            if full and len(line) > WRAP:
                indent = " " * 36
                line = "\n".join(textwrap.wrap(line, WRAP, subsequent_indent=indent, break_long_words=False,
                                               break_on_hyphens=False))
            lines.append(line)
    finally:
        _FULL.reset(token)
    return "\n".join(lines)
