"""`cuda-llm report RUN_ID`: report.md and the console table of any run, finished or not."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "write report.md for a run (finished, stopped or killed) and print its table"
DESCRIPTION = """Build RUN_ID's report from its checkpoint, its round files and its trace, write
runs/<id>/report.md, and print the candidate table. Nothing is run: no LLM, no compiler, no GPU, so it is
safe while the run is still going (the report then shows the rounds so far).

RUN_ID is an id in --runs-dir, a unique prefix of one, "latest", or a run folder."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", help="run id, unique prefix, 'latest', or a run folder")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept (default ./runs)")


def run(args: argparse.Namespace) -> int:
    from cuda_llm.report.markdown import final_table, write_report
    from cuda_llm.runs.run_info import read_values, run_info
    from cuda_llm.runs.rundir import RunDir, RunNotFoundError
    from cuda_llm.report.summary import build_summary

    try:
        rundir = RunDir.open(args.run_id, args.runs_dir)
    except RunNotFoundError as exc:
        print(f"cuda-llm report: {exc}", file=sys.stderr)
        return 2
    values = read_values(rundir)
    if not values:
        print(f"cuda-llm report: run {rundir.run_id} has no checkpoint yet (it stopped before its first step); "
              f"see {rundir.trace_path}", file=sys.stderr)
        return 2
    info = run_info(rundir)
    summary = build_summary(rundir, values)
    path = write_report(rundir, summary)
    print(final_table(summary))
    state = f"{info.state}: {info.detail}" if info.detail else info.state
    print(f"state:       {state}")
    if info.resumable:
        print(f"continue:    cuda-llm resume {rundir.run_id}")
    print(f"report:      {path}")
    print(f"trace:       {rundir.trace_path}")
    return 0
