"""`cuda-llm runs`: every run in a folder, with its state and best result."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from cuda_llm.commands import one_line_errors
from cuda_llm.commands.confirm import confirm
from cuda_llm.report.formats import fmt_duration, fmt_ms, fmt_x, one_line, render_table
from cuda_llm.runs.run_info import list_runs, run_info
from cuda_llm.runs.rundir import RunDir, RunNotFoundError

HELP = "list the optimize runs in --runs-dir: state, rounds, best latency and speedup"
DESCRIPTION = """List every run in --runs-dir (default ./runs), newest first, without running anything.

state: running (a process holds the run now), finished (with its stop reason), stopped (Ctrl-C/SIGTERM
at a step boundary), failed (an LLM endpoint error), killed (the process died without closing the run:
kill -9, a reboot). Stopped, failed and killed runs continue with `cuda-llm resume RUN_ID`;
`cuda-llm report RUN_ID` writes report.md for any of them.

Housekeeping: `cuda-llm runs rm RUN_ID...` deletes runs (asks first; --yes); `cuda-llm runs --prune`
deletes the runs that hold nothing to keep: never started, or stopped before their first round finished
(a running run is never touched)."""

DETAIL_CHARS = 60


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept (default ./runs)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--prune", action="store_true", help="delete runs that never finished a round (asks first)")
    p.add_argument("--yes", action="store_true", help="do not ask before deleting")
    sub = p.add_subparsers(dest="runs_action", metavar="ACTION")
    rm = sub.add_parser("rm", help="delete runs (their whole folder)")
    rm.add_argument("run_ids", nargs="+", help="run ids, unique prefixes, or 'latest'")
    rm.add_argument("--runs-dir", type=Path, default=argparse.SUPPRESS, help="where runs are kept (default ./runs)")
    rm.add_argument("--yes", action="store_true", default=argparse.SUPPRESS, help="do not ask")


def _delete(infos, args, why: str) -> int:
    busy = [i for i in infos if i.state == "running"]
    for i in busy:
        print(f"cuda-llm runs: {i.run_id} is running ({i.detail}); stop it first", file=sys.stderr)
    todo = [i for i in infos if i.state != "running"]
    if not todo:
        return 1 if busy else 0
    for i in todo:
        print(f"  {i.run_id}  {i.task or '?'}  {i.state}, {i.rounds} round(s)")
    if not confirm(f"Delete these {len(todo)} run(s) ({why})?", yes=args.yes, command="runs"):
        return 1
    for i in todo:
        shutil.rmtree(i.root)
    print(f"deleted {len(todo)} run(s)")
    return 1 if busy else 0


def run(args: argparse.Namespace) -> int:
    if getattr(args, "runs_action", None) == "rm":
        try:
            infos = [run_info(RunDir.open(r, args.runs_dir)) for r in args.run_ids]
        except RunNotFoundError as exc:
            print(f"cuda-llm runs rm: {exc}", file=sys.stderr)
            return 2
        return _delete(infos, args, "asked for by id")
    if not args.runs_dir.is_dir():
        if args.json:       # no run yet is an empty list to a script, not an error
            print("[]")
            return 0
        if args.runs_dir == Path("runs"):      # the default, not a typo: a folder with no run yet
            print(f"no runs here (no {args.runs_dir}/ folder); start one with `cuda-llm optimize TASK`, "
                  f"or look at a recorded one first: `cuda-llm demo`")
            return 0
        print(f"cuda-llm runs: no folder {args.runs_dir} (wrong --runs-dir?); start a run with "
              f"`cuda-llm optimize TASK --runs-dir {args.runs_dir}`, or `cuda-llm demo --runs-dir {args.runs_dir}`",
              file=sys.stderr)
        return 2
    runs = list_runs(args.runs_dir)
    if args.prune:
        empty = [r for r in runs if r.state != "running" and r.rounds == 0 and r.state != "finished"]
        if not empty:
            print("nothing to prune: every run finished a round or is running")
            return 0
        return _delete(empty, args, "they never finished a round")
    if args.json:
        print(json.dumps([r.model_dump(mode="json") | {"speedup": r.speedup} for r in runs], indent=1))
        return 0
    if not runs:
        print(f"no runs in {args.runs_dir}; start one with `cuda-llm optimize TASK`, or look at a recorded one "
              f"first: `cuda-llm demo`")
        return 0
    rows = [[r.run_id, (r.task or "?") + (" (REPLAY)" if r.replay else ""), r.state, one_line(r.detail, DETAIL_CHARS), r.rounds,
             f"{r.baseline_label} {fmt_ms(r.baseline_ms)}",
             f"{r.best_id}: {fmt_ms(r.best_ms)}" if r.best_id else "-", fmt_x(r.speedup), fmt_duration(r.elapsed_s)]
            for r in runs]
    print(render_table(["run", "task", "state", "detail", "rounds", "baseline ms", "best ms", "speedup", "time"], rows,
                       align="lllllrlrr"))
    replays = [r for r in runs if r.replay]
    if replays:
        print(f"\n(REPLAY): {replays[0].replay}")
    waiting = [r.run_id for r in runs if r.resumable]
    if waiting:
        print(f"\n{len(waiting)} run(s) can continue: `cuda-llm resume {waiting[0]}`")
    return 0
