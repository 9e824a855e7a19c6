"""`cuda-llm resume RUN_ID`: continue a stopped or killed run from its last checkpoint."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "continue a stopped or killed optimize run from its last checkpoint"
DESCRIPTION = """Continue RUN_ID (an id in --runs-dir, a unique prefix of one, "latest", or a run folder).

The run keeps its task, budgets and models (from its config.json); API keys come from the environment
(OPENAI_API_KEY) or --api-key. LLM answers and measurements already made are read back from the run
directory, not asked or measured again. Time spent while the run was stopped does not count against its
wall-clock budget."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", help="run id, unique prefix, 'latest', or a run folder")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept (default ./runs)")
    p.add_argument("--api-key", help="API key when the environment has none")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def run(args: argparse.Namespace) -> int:
    from cuda_llm.agents.errors import LLMConfigError
    from cuda_llm.commands.optimize_cmd import exit_code, print_outcome
    from cuda_llm.report.progress import make_progress
    from cuda_llm.runs.rundir import RunDir, RunNotFoundError
    from cuda_llm.graph.run import resume_run, settings_from_config

    try:
        rundir = RunDir.open(args.run_id, args.runs_dir)
        config = rundir.load_config()
    except (RunNotFoundError, FileNotFoundError, ValueError) as exc:
        print(f"cuda-llm resume: {exc}", file=sys.stderr)
        return 2
    try:
        settings = settings_from_config(config.get("llm") or {}, api_key=args.api_key)
    except LLMConfigError as exc:
        print(f"cuda-llm resume: {exc}", file=sys.stderr)
        return 2
    from cuda_llm.commands.optimize_cmd import preflight_ok
    from cuda_llm.graph.run import RunBusyError

    opts = config.get("options") or {}
    if not preflight_ok("resume", settings, runs_dir=args.runs_dir, arch=opts.get("arch"),
                        profile=bool(opts.get("profile", True))):
        return 2

    try:
        out = resume_run(str(rundir.root), args.runs_dir, settings=settings,
                         progress=make_progress(args.quiet))
    except (RunBusyError, RuntimeError) as exc:
        print(f"cuda-llm resume: {exc}", file=sys.stderr)
        return 2
    print_outcome(out)
    return exit_code(out)
