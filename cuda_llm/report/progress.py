"""Console progress of a run: one short line per thing a person watching wants to know, on stderr.

Lines: run start, baseline, round start (features per candidate), each candidate's result, a new best,
round end (best latency, speedup over the baseline, candidates passed), stop reason, finish. Nothing
per LLM token or per node, so an overnight log stays readable. The graph calls the methods directly;
``on_event`` also accepts trace events (``tracer.add_listener(progress.on_event)``) for candidate results,
new bests and the stop decision.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Sequence, TextIO

from cuda_llm.report.formats import fmt_duration, fmt_ms, fmt_x


class ConsoleProgress:
    """Prints progress lines to ``stream`` (stderr by default); never raises for a broken stream."""

    def __init__(self, stream: TextIO | None = None, *, clock: Any = time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        self._clock = clock
        self._t0 = clock()
        self._stop_shown = False
        self._best_ms: float | None = None
        self._baseline_ms: float | None = None

    # -- output
    def line(self, text: str) -> None:
        stamp = fmt_duration(max(0.0, self._clock() - self._t0))
        try:
            self.stream.write(f"[{stamp:>8}] {text}\n")
            self.stream.flush()
        except (OSError, ValueError):  # closed terminal or pipe: the run goes on
            pass

    # -- called by the graph
    def start(self, run_id: str, task: str, *, resumed: bool = False) -> None:
        self._t0 = self._clock()
        self.line(f"{'resuming' if resumed else 'run'} {run_id}: optimizing {task}")

    def baseline(self, ms: float | None) -> None:
        self._baseline_ms = ms
        self.line(f"naive baseline: {fmt_ms(ms)} ms" if ms is not None else "naive baseline: not timed (no GPU result)")

    def round_start(self, index: int, features: Sequence[Sequence[str]] = ()) -> None:
        plans = "; ".join(f"c{i + 1}: {', '.join(f) or 'free choice'}" for i, f in enumerate(features))
        self.line(f"round {index}: {len(features)} candidate(s)" + (f" [{plans}]" if plans else ""))

    def candidate(self, cid: str, status: str, median_ms: float | None = None, speedup: float | None = None,
                  note: str = "") -> None:
        parts = [f"  {cid}: {status}"]
        if median_ms is not None:
            parts.append(f"{fmt_ms(median_ms)} ms")
        if speedup is not None:
            parts.append(f"{fmt_x(speedup)} vs parent")
        text = ", ".join(parts)
        if note and status not in ("ok",):
            flat = " ".join(note.split())
            text += f" ({flat[:100]}{'...' if len(flat) > 100 else ''})"
        self.line(text)

    def new_best(self, cid: str, ms: float | None, speedup: float | None = None) -> None:
        self._best_ms = ms
        if speedup is None and ms and self._baseline_ms:
            speedup = self._baseline_ms / ms
        self.line(f"  new best: {cid} at {fmt_ms(ms)} ms ({fmt_x(speedup)} over the baseline)")

    def round_end(self, index: int, best_ms: float | None, speedup: float | None, passed: int, total: int,
                  stop_reason: str | None = None) -> None:
        self._best_ms = best_ms
        self.line(f"round {index} done: {passed}/{total} passed; best {fmt_ms(best_ms)} ms ({fmt_x(speedup)} over the baseline)")
        if stop_reason:
            self.stop(stop_reason)

    def stop(self, reason: str, text: str = "") -> None:
        if self._stop_shown:
            return
        self._stop_shown = True
        self.line(f"stopping: {reason}" + (f" ({text})" if text else ""))

    def finish(self, outcome: Any = None) -> None:
        if outcome is None:
            self.line("finished")
            return
        if getattr(outcome, "interrupted", False):
            run_id = getattr(outcome, "run_id", "RUN_ID")
            self.line(f"interrupted; continue with `cuda-llm resume {run_id}`")
        elif getattr(outcome, "error", None):
            self.line(f"failed: {outcome.error}")
        elif getattr(outcome, "waiting", None):
            self.line(f"waiting for {len(outcome.waiting)} answer(s): " + ", ".join(w["name"] for w in outcome.waiting))
        else:
            best = getattr(outcome, "best", {}) or {}
            self.line(f"finished ({getattr(outcome, 'stop_reason', None) or 'done'}); best {best.get('id', '-')} "
                      f"at {fmt_ms(best.get('ms'))} ms")

    # -- trace events
    def on_event(self, event: dict[str, Any]) -> None:
        """Show the trace events that matter to a person: evaluations, a replaced best, the stop decision."""
        name = event.get("event")
        if name == "evaluation":
            self.candidate(str(event.get("candidate")), str(event.get("status")), event.get("median_ms"),
                           event.get("speedup_over_parent"), str(event.get("note") or ""))
        elif name == "decision" and event.get("kind") == "selection" and event.get("replaced"):
            self.new_best(str(event.get("candidate")), event.get("candidate_ms"))
        elif name == "decision" and event.get("kind") == "stop":
            self.stop(str(event.get("reason")), str(event.get("text") or ""))
