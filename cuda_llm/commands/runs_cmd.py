"""`cuda-llm runs`: every run in a folder, with its state and best result."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HELP = "list the optimize runs in --runs-dir: state, rounds, best latency and speedup"
DESCRIPTION = """List every run in --runs-dir (default ./runs), newest first, without running anything.

state: running (a process holds the run now), finished (with its stop reason), stopped (Ctrl-C/SIGTERM
at a step boundary), failed (an LLM endpoint error), killed (the process died without closing the run:
kill -9, a reboot). Stopped, failed and killed runs continue with `cuda-llm resume RUN_ID`;
`cuda-llm report RUN_ID` writes report.md for any of them."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept (default ./runs)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    from cuda_llm.report.formats import render_table
    from cuda_llm.report.formats import fmt_duration, fmt_ms, fmt_x
    from cuda_llm.runs.run_info import list_runs

    if not args.runs_dir.is_dir():
        print(f"cuda-llm runs: no folder {args.runs_dir} (wrong --runs-dir?); start a run with "
              f"`cuda-llm optimize TASK`", file=sys.stderr)
        return 2
    runs = list_runs(args.runs_dir)
    if args.json:
        print(json.dumps([r.model_dump(mode="json") | {"speedup": r.speedup} for r in runs], indent=1))
        return 0
    if not runs:
        print(f"no runs in {args.runs_dir}; start one with `cuda-llm optimize TASK`")
        return 0
    rows = [[r.run_id, r.task or "?", r.state, r.detail, r.rounds, fmt_ms(r.baseline_ms),
             f"{r.best_id}: {fmt_ms(r.best_ms)}" if r.best_id else "-", fmt_x(r.speedup), fmt_duration(r.elapsed_s)]
            for r in runs]
    print(render_table(["run", "task", "state", "detail", "rounds", "naive ms", "best ms", "speedup", "time"], rows,
                       align="lllllrlrr"))
    waiting = [r.run_id for r in runs if r.resumable]
    if waiting:
        print(f"\n{len(waiting)} run(s) can continue: `cuda-llm resume {waiting[0]}`")
    return 0
