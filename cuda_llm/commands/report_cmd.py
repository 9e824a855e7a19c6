"""`cuda-llm report RUN_ID`: report.md (and report.html) of any run, finished or not; or its data as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cuda_llm.commands import one_line_errors
from cuda_llm.runs.run_info import read_values, run_info
from cuda_llm.runs.rundir import RunDir, RunNotFoundError

HELP = "write a run's report (report.md; --html: one self-contained report.html; --json for scripts)"
DESCRIPTION = """Build RUN_ID's report from its checkpoint, its round files and its trace, write
runs/<id>/report.md, and print the candidate table. Nothing is run: no LLM, no compiler, no GPU, so it is
safe while the run is still going (the report then shows the rounds so far).

--html also writes runs/<id>/report.html: one file that opens in any browser with no network (the plot
library is inside it): latency per round, the candidate tree, each candidate's code, diff, prompts and
answers, results, profile and diagnosis on click, the critic's words and the tokens spent.
--json prints the report's data (summary and every candidate's numbers) instead of the table.

RUN_ID is an id in --runs-dir, a unique prefix of one, "latest", or a run folder."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("run_id", help="run id, unique prefix, 'latest', or a run folder")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept (default ./runs)")
    p.add_argument("--html", action="store_true", help="also write report.html (self-contained, opens offline)")
    p.add_argument("--json", action="store_true", help="print the report's data as JSON instead of the table")


def run(args: argparse.Namespace) -> int:
    from cuda_llm.report.markdown import final_table, write_report   # on use: ~6 ms off `--help`
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
    summary.state = info.state
    path = write_report(rundir, summary)
    state = f"{info.state}: {info.detail}" if info.detail else info.state
    html_path = None
    if args.html or args.json:
        # the HTML report: imported only for --html/--json, off the `--help` start-up
        from cuda_llm.report.html import build_report_data, write_html

        data = build_report_data(rundir, values, summary, state)
        if args.html:
            html_path = write_html(rundir, data)
        if args.json:
            print(json.dumps(data.for_json(), indent=1))
            return 0
    print(final_table(summary))
    print(f"state:       {state}")
    if info.resumable:
        print(f"continue:    cuda-llm resume {rundir.run_id}")
    elif info.state == "running":
        print(f"watch:       cuda-llm trace {rundir.run_id} --follow")
    print(f"report:      {path}")
    if html_path is not None:
        print(f"html:        {html_path}")
    print(f"trace:       {rundir.trace_path}")
    return 0
