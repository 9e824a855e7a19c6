"""Console progress of a run: one short line per thing a person watching wants to know, on stderr.

Lines: run start, baseline, round start (features per candidate), every LLM call (role, candidate, seconds,
tokens), every evaluation and profile, a new best, round end (with tokens and time against the budgets and
an estimate of the time left), stop reason, finish. The graph calls the methods directly; ``on_event`` takes
the trace events (``tracer.add_listener(progress.on_event)``).

``make_progress`` picks the display: a live one in a terminal (rich: the lines scroll above a status bar
of time and tokens against budget and the ETA), plain time-stamped lines in a log file or a pipe, nothing
with ``--quiet``.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Sequence, TextIO

from cuda_llm.report.formats import fmt_duration, fmt_ms, fmt_tokens, fmt_x
from cuda_llm.results import NAIVE_BASELINE


class Budget:
    """Time and tokens spent against the run's limits, and a time-left estimate. Pure bookkeeping."""

    def __init__(self) -> None:
        self.limits: dict[str, Any] = {}
        self.elapsed_at_start = 0.0       # active seconds of earlier sessions
        self.tokens = 0
        self.rounds_done = 0
        self.round_s: list[float] = []    # this session's round durations

    def eta_s(self, elapsed_s: float) -> float | None:
        """Seconds left at most: the rounds left at the mean round time, capped by the time budget left."""
        lim = self.limits
        budget = lim.get("time_budget_s")
        left_by_time = max(0.0, float(budget) - elapsed_s) if budget else None
        if not self.round_s or not lim.get("max_rounds"):
            return left_by_time
        per_round = sum(self.round_s) / len(self.round_s)
        left_by_rounds = max(0, int(lim["max_rounds"]) - self.rounds_done) * per_round
        return left_by_rounds if left_by_time is None else min(left_by_rounds, left_by_time)

    def short(self, elapsed_s: float) -> str:
        """Time and tokens against the budgets, for the end of an event line."""
        lim = self.limits
        if not lim:
            return ""
        t = fmt_duration(elapsed_s) + (f"/{fmt_duration(lim['time_budget_s'])}" if lim.get("time_budget_s") else "")
        tok = fmt_tokens(self.tokens) + (f"/{fmt_tokens(lim['token_budget'])}" if lim.get("token_budget") else "")
        return f"{t}, {tok} tokens"

    def status(self, elapsed_s: float) -> str:
        lim = self.limits
        t = fmt_duration(elapsed_s) + (f"/{fmt_duration(lim['time_budget_s'])}" if lim.get("time_budget_s") else "")
        tok = fmt_tokens(self.tokens) + (f"/{fmt_tokens(lim['token_budget'])}" if lim.get("token_budget") else "")
        eta = self.eta_s(elapsed_s)
        return f"time {t}, tokens {tok}" + (f", ETA <= {fmt_duration(eta)}" if eta is not None else "")


class ConsoleProgress:
    """Prints progress lines to ``stream`` (stderr by default); never raises for a broken stream."""

    def __init__(self, stream: TextIO | None = None, *, clock: Any = time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        self._clock = clock
        self._t0 = clock()
        self._stop_shown = False
        self._best_ms: float | None = None
        self._baseline_ms: float | None = None
        self._lock = threading.Lock()
        self.budget = Budget()
        self._round_t0: float | None = None

    # -- output
    def elapsed(self) -> float:
        return self.budget.elapsed_at_start + max(0.0, self._clock() - self._t0)

    def emit(self, text: str) -> None:
        """Write one finished line (the live display overrides this)."""
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # closed terminal or pipe: the run goes on
            pass

    def line(self, text: str) -> None:
        stamp = fmt_duration(max(0.0, self._clock() - self._t0))
        with self._lock:
            self.emit(f"[{stamp:>8}] {text}")

    def budget_suffix(self) -> str:
        """' [time/budget, tokens/budget]' after an LLM or evaluation line (the live display has a status bar)."""
        text = self.budget.short(self.elapsed())
        return f"  [{text}]" if text else ""

    # -- called by the graph
    def start(self, run_id: str, task: str, *, resumed: bool = False, limits: dict | None = None,
              elapsed_s: float = 0.0, tokens: int = 0) -> None:
        self._t0 = self._clock()
        self.budget.limits = dict(limits or {})
        self.budget.elapsed_at_start = float(elapsed_s or 0.0)
        self.budget.tokens = int(tokens or 0)
        self.line(f"{'resuming' if resumed else 'run'} {run_id}: optimizing {task}")

    def baseline(self, ms: float | None, label: str = NAIVE_BASELINE) -> None:
        """The baseline's time; ``label`` says what it is (Task.baseline_label: naive, or PyTorch eager)."""
        self._baseline_ms = ms
        self.line(f"{label} baseline: " + (f"{fmt_ms(ms)} ms" if ms is not None else "not timed (no GPU result)"))

    def round_start(self, index: int, features: Sequence[Sequence[str]] = ()) -> None:
        self._round_t0 = self._clock()
        plans = "; ".join(f"r{index}c{i}: {', '.join(f) or 'free choice'}" for i, f in enumerate(features))
        self.line(f"round {index}: {len(features)} candidate(s)" + (f" [{plans}]" if plans else ""))

    def llm_call(self, role: str, candidate: str | None, seconds: float, tokens_in: int, tokens_out: int,
                 cached: bool = False) -> None:
        self.budget.tokens += 0 if cached else int(tokens_in) + int(tokens_out)
        about = f" {candidate}" if candidate else ""
        how = "replayed from the run's cache" if cached else f"{seconds:.1f} s, {tokens_in:,} in / {tokens_out:,} out"
        self.line(f"  llm {role}{about}: {how}{self.budget_suffix()}")

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
        self.line(text + self.budget_suffix())

    def profiled(self, cid: str, bottleneck: str, summary: str = "", available: bool = True) -> None:
        flat = " ".join((summary or "").split())
        what = f"{bottleneck}" + (f": {flat[:100]}" if flat else "") if available else f"no profile ({flat[:100]})"
        self.line(f"  profile {cid}: {what}")

    def new_best(self, cid: str, ms: float | None, speedup: float | None = None) -> None:
        self._best_ms = ms
        if speedup is None and ms and self._baseline_ms:
            speedup = self._baseline_ms / ms
        self.line(f"  new best: {cid} at {fmt_ms(ms)} ms ({fmt_x(speedup)} over the baseline)")

    def round_end(self, index: int, best_ms: float | None, speedup: float | None, passed: int, total: int,
                  stop_reason: str | None = None) -> None:
        self._best_ms = best_ms
        self.budget.rounds_done = index
        if self._round_t0 is not None:
            self.budget.round_s.append(max(0.0, self._clock() - self._round_t0))
            self._round_t0 = None
        self.line(f"round {index} done: {passed}/{total} passed; best {fmt_ms(best_ms)} ms "
                  f"({fmt_x(speedup)} over the baseline); {self.budget.status(self.elapsed())}")
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
        elif getattr(outcome, "halt", None):
            self.line(f"halted ({outcome.halt}): {outcome.halt_text}")
        elif getattr(outcome, "interrupted", False):
            run_id = getattr(outcome, "run_id", "RUN_ID")
            self.line(f"interrupted; continue with `cuda-llm resume {run_id}`")
        elif getattr(outcome, "error", None):
            self.line(f"failed: {outcome.error}")
        elif getattr(outcome, "waiting", None):
            self.line(f"waiting for {len(outcome.waiting)} answer(s): " + ", ".join(w["name"] for w in outcome.waiting))
        else:
            best = getattr(outcome, "best", {}) or {}
            self.line(f"finished ({getattr(outcome, 'stop_reason', None) or 'done'}); best {best.get('id', '-')} "
                      f"at {fmt_ms(best.get('ms'))} ms in its round")
        self.close()

    def close(self) -> None:
        """End the display (the live one stops its status bar)."""

    # -- trace events
    def on_event(self, event: dict[str, Any]) -> None:
        """Show the trace events that matter to a person: LLM calls, evaluations, profiles, a replaced best,
        the stop decision."""
        name = event.get("event")
        if name == "llm_call":
            self.llm_call(str(event.get("role")), event.get("candidate"), float(event.get("latency_s") or 0.0),
                          int(event.get("input_tokens") or 0), int(event.get("output_tokens") or 0),
                          bool(event.get("cached")))
        elif name == "llm_error":
            self.line(f"  llm {event.get('role')} {event.get('candidate') or ''}: failed ({str(event.get('error'))[:120]})")
        elif name == "evaluation":
            self.candidate(str(event.get("candidate")), str(event.get("status")), event.get("median_ms"),
                           event.get("speedup_over_parent"), str(event.get("note") or ""))
        elif name == "profile":
            self.profiled(str(event.get("candidate")), str(event.get("bottleneck")), str(event.get("summary") or ""),
                          bool(event.get("available", True)))
        elif name == "decision" and event.get("kind") == "selection" and event.get("replaced"):
            self.new_best(str(event.get("candidate")), event.get("candidate_ms"))
        elif name == "decision" and event.get("kind") == "stop":
            self.stop(str(event.get("reason")), str(event.get("text") or ""))


class LiveProgress(ConsoleProgress):
    """The same lines through rich, scrolling above a live status bar: round, best, time and tokens against
    the budgets, ETA. For terminals only (make_progress decides)."""

    def __init__(self, console: Any = None, *, clock: Any = time.monotonic):
        from rich.console import Console
        from rich.live import Live

        self.console = console or Console(stderr=True)
        super().__init__(self.console.file, clock=clock)
        self._round = 0
        self._live = Live(self._status(), console=self.console, refresh_per_second=2, transient=True,
                          get_renderable=self._status)
        self._live.start()

    def _status(self) -> Any:
        from rich.text import Text

        best = f"best {fmt_ms(self._best_ms)} ms" if self._best_ms is not None else "best: baseline"
        return Text(f"round {self._round} | {best} | {self.budget.status(self.elapsed())}", style="bold cyan")

    def emit(self, text: str) -> None:
        try:
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)
        except (OSError, ValueError):
            pass

    def round_start(self, index: int, features: Sequence[Sequence[str]] = ()) -> None:
        self._round = index
        super().round_start(index, features)

    def budget_suffix(self) -> str:
        return ""   # the status bar shows time, tokens and the ETA all the time

    def close(self) -> None:
        try:
            self._live.stop()
        except Exception:  # noqa: BLE001 - the terminal went away
            pass


def make_progress(quiet: bool = False, stream: TextIO | None = None) -> ConsoleProgress | None:
    """None with ``quiet``; the live display on a terminal; plain lines otherwise (a log, a pipe)."""
    if quiet:
        return None
    stream = stream if stream is not None else sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        try:
            from rich.console import Console

            return LiveProgress(Console(file=stream))
        except ImportError:   # rich is a dependency; a broken install still gets plain lines
            pass
    return ConsoleProgress(stream)
