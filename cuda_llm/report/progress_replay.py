"""The live progress display of a recorded run, replayed from its trace events (`cuda-llm demo --live`).

The same display a run shows (report/progress.py: the live one in a terminal, plain lines elsewhere) is
driven by the recorded events in their order, at ``speed`` times the recorded pace, with the line stamps and
the status bar showing the recorded run's own time. The waits of a manual run between its sessions (the
hours a person or a model spent answering prompt files) are left out: the replay says so in one line.
Pure mapping of events to the display's calls; the sleeping is injected, so tests run it at once.
"""

from __future__ import annotations

import time
from datetime import datetime
from types import SimpleNamespace
from typing import Any, Callable, Iterable

from cuda_llm.report.formats import fmt_ms, fmt_x
from cuda_llm.results import NAIVE_BASELINE


class RecordedClock:
    """The display's clock: the recorded run's active seconds at the event being shown."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _when(ev: dict[str, Any]) -> float | None:
    try:
        return datetime.fromisoformat(str(ev.get("timestamp", "")).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def replay(events: Iterable[dict[str, Any]], progress: Any, clock: RecordedClock, *, speed: float = 20.0,
           sleep: Callable[[float], None] = time.sleep, max_wait_s: float = 5.0, run_id: str = "") -> int:
    """Show ``events`` on ``progress`` (made with ``clock``); returns how many events were shown. No single
    wait is longer than ``max_wait_s`` (a long tuning sweep does not freeze the replay). ``run_id``: the id
    the display names (an installed copy's, not the recorded run's)."""
    prev: float | None = None
    paused = False
    shown = 0
    for ev in events:
        kind = ev.get("event")
        t = _when(ev)
        if kind == "run_resume":
            paused = False          # the time spent waiting for answers is not replayed
            prev = t
            progress.line("  (the answers came: the run goes on; the wait is left out of the replay)")
            continue
        if t is not None and prev is not None and not paused:
            gap = max(0.0, t - prev)
            if speed > 0:
                sleep(min(max_wait_s, gap / speed))
            clock.now += gap
        prev = t if t is not None else prev
        shown += _show({**ev, "run_id": run_id} if run_id and kind == "run_start" else ev, progress)
        if kind == "run_end" and not ev.get("finished"):
            paused = True
    return shown


def _show(ev: dict[str, Any], progress: Any) -> int:
    kind = ev.get("event")
    if kind == "run_start":
        progress.start(str(ev.get("run_id")), str(ev.get("task")), limits=ev.get("limits") or {})
    elif kind == "baseline":
        progress.baseline(ev.get("median_ms"), str(ev.get("label") or NAIVE_BASELINE))
    elif kind == "decision" and ev.get("kind") == "features":
        cands = ev.get("candidates") or {}
        progress.round_start(int(ev.get("round") or 0), [cands[c] for c in sorted(cands)])
    elif kind == "round_end":
        progress.round_end(int(ev.get("round") or 0), ev.get("best_ms"), ev.get("speedup"), int(ev.get("passed") or 0),
                           int(ev.get("candidates") or 0), ev.get("stop_reason"))
    elif kind == "final":
        progress.line(f"final re-check of {ev.get('candidate')}: {ev.get('status')}, {fmt_ms(ev.get('ms'))} ms "
                      f"({fmt_x(ev.get('speedup'))} over the baseline)")
    elif kind == "waiting":
        progress.line(f"waiting for {len(ev.get('prompts') or [])} answer(s): {', '.join(ev.get('prompts') or [])}")
    elif kind == "run_end":
        if not ev.get("finished"):
            return 1
        progress.finish(SimpleNamespace(halt=None, interrupted=False, error=ev.get("error"), waiting=None,
                                        stop_reason=ev.get("stop_reason"),
                                        best={"id": ev.get("best"), "ms": ev.get("best_ms")}, run_id=""))
    elif kind in ("llm_call", "llm_error", "evaluation", "profile", "decision"):
        progress.on_event(ev)
    else:
        return 0
    return 1
