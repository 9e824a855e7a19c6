"""`cuda-llm show RUN CANDIDATE`: one candidate whole."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cuda_llm.commands import one_line_errors
from cuda_llm.runs.run_info import read_values
from cuda_llm.runs.rundir import RunDir, RunNotFoundError

HELP = "show one candidate whole: prompt and answer, source, diff, compile log, results, timing, profile"
DESCRIPTION = """Print everything about CANDIDATE (e.g. r2c1, r1c0f1 for a repair, or baseline) of RUN_ID:
the prompts and answers that produced it (and the critic's exchange about it), its source and the diff
against its parent, the compile log, the result of every test case (held-out shapes redacted), the timing
samples (summarised), the Nsight Compute profile and the diagnosis. Nothing is run.

--section NAME prints one section alone, whole (for a pager or a file): prompt, answer, source, diff,
compile, cases, failure, timings (every timing sample, ten a line), profile, diagnosis or critic.

RUN_ID is an id in --runs-dir, a unique prefix of one, "latest", or a run folder.

Examples:
  cuda-llm show latest r2c1
  cuda-llm show latest r2c1 --section diff
  cuda-llm show latest r2c1 --section source > r2c1.cu"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("run_id", help="run id, unique prefix, 'latest', or a run folder")
    p.add_argument("candidate", help="candidate id, e.g. r2c1 (see `cuda-llm report RUN`)")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept (default ./runs)")
    p.add_argument("--section", metavar="NAME", help="print one section alone: prompt, answer, source, diff, compile, "
                   "cases, failure, timings, profile, diagnosis, critic")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def run(args: argparse.Namespace) -> int:
    from cuda_llm.report.candidate_view import candidate_view, render_text   # on use: ~6 ms off `--help`

    try:
        rundir = RunDir.open(args.run_id, args.runs_dir)
    except RunNotFoundError as exc:
        print(f"cuda-llm show: {exc}", file=sys.stderr)
        return 2
    try:
        view = candidate_view(rundir, read_values(rundir), args.candidate)
    except KeyError as exc:
        print(f"cuda-llm show: {exc.args[0]}", file=sys.stderr)
        return 2
    if args.json:
        print(view.model_dump_json(indent=1))
        return 0
    try:
        text = render_text(view, args.section)
    except ValueError as exc:
        print(f"cuda-llm show: {exc}", file=sys.stderr)
        return 2
    # a section alone is the file itself (source, a prompt): no replay banner that would spoil `> r2c1.cu`
    print(text, end="")
    return 0
