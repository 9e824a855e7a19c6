"""What a run's folder says about it, without running it: its state from the checkpoint (opened read-only),
whether a process is driving it now (the run lock), and how its last session ended (the trace).

This is what a person looks at the morning after: `cuda-llm runs` lists every run with its state and best
result, `cuda-llm report RUN_ID` writes report.md for any run, finished or not. Nothing here loads a
model, a compiler or the GPU.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel

from cuda_llm.results import NAIVE_BASELINE, baseline_label, speedup
from cuda_llm.runs.replay import replay_line
from cuda_llm.runs.rundir import RunDir, recent_runs

SESSION_EVENTS = ("run_start", "run_resume", "run_end")


class RunInfo(BaseModel):
    """One run at a glance (the rows of `cuda-llm runs`)."""

    run_id: str
    root: Path
    task: str | None = None
    state: str = "not started"   # running | finished | stopped | waiting | failed | killed | not started
    detail: str = ""             # stop reason, error, or who is running it
    rounds: int = 0
    baseline_ms: float | None = None
    baseline_label: str = NAIVE_BASELINE     # what speedup 1.0 is: naive, or PyTorch eager
    best_id: str | None = None
    best_ms: float | None = None
    elapsed_s: float = 0.0
    replay: str = ""                         # a recorded run installed by `cuda-llm demo`: what it replays

    @property
    def speedup(self) -> float | None:
        return speedup(self.baseline_ms, self.best_ms)

    @property
    def resumable(self) -> bool:
        return self.state in ("stopped", "waiting", "failed", "killed")


# ------------------------------------------------------------------------------------------------- pure
def session_state(events: Iterable[dict[str, Any]], holder: str | None = None) -> tuple[str, str]:
    """(state, detail) from the trace's events: a run whose last session started and never wrote
    ``run_end`` was killed (kill -9, a reboot, out of memory); one whose lock is held is running."""
    if holder:
        return "running", holder
    last: dict[str, Any] | None = None
    last_error = ""
    for ev in events:
        kind = ev.get("event")
        if kind in SESSION_EVENTS:
            last = ev
            if kind != "run_end":
                last_error = ""
        elif kind == "error":
            last_error = str(ev.get("error") or "")
    if last is None:
        return "not started", ""
    if last.get("event") != "run_end":
        return "killed", last_error or "the process ended without closing the run"
    if last.get("finished"):
        return "finished", str(last.get("stop_reason") or "")
    if last.get("halt"):
        return "stopped", f"{last['halt']}: {last.get('halt_text') or ''}".rstrip(": ")
    if last.get("error"):
        return "failed", str(last["error"])
    if last.get("waiting"):   # a role played manually: prompt files to answer (cuda-llm answer)
        return "waiting", f"{last['waiting']} prompt(s) to answer: `cuda-llm answer RUN` lists them"
    return "stopped", "stopped at a step boundary" if last.get("interrupted") else ""


# --------------------------------------------------------------------------------------------------- I/O
def read_values(rundir: Any) -> dict[str, Any]:
    """The state of the run's newest checkpoint ({} before the first one), read-only: safe while another
    process is driving the run."""
    path = Path(rundir.checkpoint_path)
    if not path.is_file():
        return {}
    # local: `cuda-llm --help` loads this module; the checkpointer pulls LangGraph
    from langgraph.checkpoint.sqlite import SqliteSaver

    # local: `cuda-llm --help` loads this module; the checkpoint serializer pulls LangGraph
    from cuda_llm.runs.serde import CompressedSerializer

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    try:
        saver = SqliteSaver(conn, serde=CompressedSerializer())
        found = saver.get_tuple({"configurable": {"thread_id": rundir.run_id}})
    except sqlite3.DatabaseError:
        return {}
    finally:
        conn.close()
    if found is None:
        return {}
    return {k: v for k, v in found.checkpoint.get("channel_values", {}).items() if not k.startswith("__")}


def lock_holder(root: Path) -> str | None:
    """"pid N" when a process holds the run's lock now, else None (a killed process holds nothing)."""
    import fcntl

    path = Path(root) / "run.lock"
    if not path.is_file():
        return None
    with open(path) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return (f.read().strip() or "another process")
        fcntl.flock(f, fcntl.LOCK_UN)
    return None


def run_info(rundir: Any) -> RunInfo:
    # local: `cuda-llm --help` loads this module; the trace module pulls rich
    from cuda_llm.runs.trace import read_trace

    values = read_values(rundir)
    try:
        events = read_trace(rundir.trace_path)
    except (OSError, ValueError):
        events = []
    state, detail = session_state(events, lock_holder(rundir.root))

    try:
        task = rundir.load_config().get("task")
    except (OSError, ValueError):
        task = values.get("task")
    best = values.get("best") or {}
    final = values.get("final") or {}
    return RunInfo(run_id=rundir.run_id, root=Path(rundir.root), task=values.get("task") or task, state=state,
                   detail=detail, rounds=int(values.get("round") or 0),
                   baseline_ms=(values.get("baseline") or {}).get("ms"),
                   baseline_label=baseline_label(values.get("baseline")), best_id=best.get("id"),
                   best_ms=final.get("ms") or best.get("ms"), elapsed_s=float(values.get("elapsed_s") or 0.0),
                   replay=replay_line(rundir))


def list_runs(runs_dir: Path) -> list[RunInfo]:
    """Every run in ``runs_dir``, newest first."""
    return [run_info(RunDir(Path(runs_dir) / rid)) for rid in recent_runs(Path(runs_dir), limit=10_000)]
