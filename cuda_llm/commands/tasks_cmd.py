"""`cuda-llm tasks`: list the task suite."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cuda_llm.commands import one_line_errors
from cuda_llm.report.formats import render_table

HELP = "list the built-in tasks and those in your task folders"
DESCRIPTION = """List every task: its entry signature, family and the benchmark shape.

Tasks come from the built-in suite, from folders named in $CUDA_LLM_TASKS (separated by ':'),
and from --tasks-dir. A folder holds task.toml, reference.py and naive.cu (see docs/tasks.md); one made
by `cuda-llm import kernelbench` also holds the PyTorch module it was derived from (docs/torch.md).
A task that does not load is named with its error after the list (exit code 1); `cuda-llm check-task DIR`
checks one folder in depth."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("--tasks-dir", type=Path, action="append", default=[], help="extra folder of tasks")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("-v", "--verbose", action="store_true", help="show the entry signature of each task")


def run(args: argparse.Namespace) -> int:
    # the tasks (NumPy): imported on use, off the `--help` start-up
    from cuda_llm.tasks import TaskError
    from cuda_llm.tasks.loader import load_all_reporting

    try:
        good, bad = load_all_reporting(args.tasks_dir)
    except TaskError as exc:      # a tasks folder that does not exist
        print(f"cuda-llm tasks: {exc}", file=sys.stderr)
        return 2
    tasks = [lt.task for lt in good]
    if args.json:
        print(json.dumps([t.model_dump(mode="json") for t in tasks], indent=2))
    else:
        rows = []
        for t in tasks:
            bench = ", ".join(f"{k}={v}" for k, v in t.benchmark.items())
            row = [t.name, t.domain, t.family, t.bound, bench, ("yes" if t.library_path else "torch.compile" if t.torch else "-")]
            if args.verbose:
                row.append(t.signature)
            rows.append(row)
        headers = ["task", "domain", "family", "bound", "benchmark shape", "library"]
        if args.verbose:
            headers.append("signature")
        print(render_table(headers, rows))
    for exc in bad:
        print(f"cuda-llm tasks: not loaded: {exc}", file=sys.stderr)
    return 1 if bad else 0
