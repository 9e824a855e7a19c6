"""`cuda-llm demo`: a finished run to look at, on any machine (no GPU, no endpoint, nothing is run)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cuda_llm.commands import one_line_errors
from cuda_llm.runs.replay import DEFAULT_RECORDING, RecordingError, install, installed_copy, replay_line
from cuda_llm.runs.run_info import run_info

HELP = "install a recorded run (measured on an H100) as a new run, to try runs, report, show, trace and export"
DESCRIPTION = """Copy a run recorded on a real GPU (shipped with cuda-llm) into --runs-dir under a new id ending
in -replay-XXXX, then try every command that reads runs on it: no GPU, no LLM endpoint, no compiler.

The run is marked as a replay in config.json, and `runs`, `report` (Markdown and HTML), `show`, `trace`
and `export` say so: nothing in it was measured on this machine. recording.json in the run folder says
what was recorded and where each figure comes from. Delete it like any run: `cuda-llm runs rm RUN_ID`.

Running `demo` again does not install a second, identical copy: it names the copy already in --runs-dir
(--again installs another, e.g. to try `runs rm` on it)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept (default ./runs)")
    p.add_argument("--again", action="store_true",
                   help="install a new copy even when --runs-dir already holds one of this recording")
    p.add_argument("--recording", default=None, help="which recorded run: conv2d (default; a real H100 run whose coder was a model answering the prompts) or softmax (assembled from recorded H100 figures)")


def run(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    name = args.recording or DEFAULT_RECORDING
    # A recording is the same run every time: a second copy would add a row of identical figures to
    # `runs` and nothing else, so a repeated `demo` shows the copy already there (--again for another).
    existing = None if args.again else installed_copy(args.runs_dir, name)
    try:
        rundir = existing or install(args.runs_dir, name)
    except (RecordingError, OSError) as exc:
        print(f"cuda-llm demo: {exc}", file=sys.stderr)
        return 2
    rid, flag = rundir.run_id, "" if args.runs_dir == Path("runs") else f" --runs-dir {args.runs_dir}"
    if existing:
        print(f"the {name} demo is already installed as run {rid} in {args.runs_dir}/ (--again installs another copy)")
    else:
        print(f"installed run {rid} in {args.runs_dir}/ in {time.monotonic() - t0:.1f} s")
    print(replay_line(rundir))
    best = run_info(rundir).best_id or "baseline"
    print("\nTry:")
    for cmd in (f"cuda-llm runs{flag}", f"cuda-llm report {rid}{flag} --html", f"cuda-llm show {rid} {best}{flag}",
                f"cuda-llm trace {rid}{flag}", f"cuda-llm export {rid} --torch exported/demo{flag}   (needs nvcc)"):
        print(f"  {cmd}")
    print(f"\nThe HTML report: {rundir.root / 'report.html'} (after `report --html`)")
    return 0
