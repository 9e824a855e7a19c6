"""`cuda-llm optimize TASK`: run the agent loop on one task until it stops improving or a budget ends."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cuda_llm.agents.errors import LLMConfigError
from cuda_llm.agents.settings import load_settings
from cuda_llm.commands import one_line_errors
from cuda_llm.commands.flags import (
    add_budget_arguments, add_gpu_arguments, add_llm_arguments, add_search_arguments, check_gpus_arg, limits_from_args,
    llm_cli, parse_stage_arg, timing_budget,
)
from cuda_llm.commands.outcome import exit_code, print_outcome
from cuda_llm.commands.preflight import preflight_ok
from cuda_llm.graph.run import RunOptions, start_run
from cuda_llm.graph.stage_plugins import StageError, with_plugins
from cuda_llm.report.progress import make_progress

HELP = "optimize a task's kernel with the LLM agents (plan, code, evaluate, profile, critique)"
DESCRIPTION = """Run the optimization loop on TASK (a suite name or a task folder).

Each round the planner picks hardware features for N candidates, the coders write them in parallel,
every candidate is compiled, tested on many shapes (some never shown to the LLM) and timed on the GPU,
the fastest is profiled with Nsight Compute and the critic says what limits it. The loop stops on a
plateau (best latency not better by more than --plateau-threshold over --plateau-rounds rounds at 50% of
speed of light, more rounds further from it, fewer closer), at --sol-target of speed of light, after
--rounds rounds, or when the time or token budget is spent; time is kept back for the final check.
Parents come from every passing kernel so far (the best, stepping stones, other approaches); a kernel that
declares `// cuda-llm: tune NAME values` is tuned after it passes (see `cuda-llm tune --help`).

Everything goes to RUNS_DIR/<run-id>/: trace.jsonl, checkpoint.sqlite, candidates/, prompts/,
answers/, report.md and best.cu. Ctrl-C (or SIGTERM) stops after the current step; continue with
`cuda-llm resume RUN_ID`.

Before anything is created or spent, the checks of `cuda-llm doctor` run (GPU, nvcc, disk, the endpoint);
a failure is one line saying what to do (exit 2). A run halts, unfinished and resumable, instead of
spending when the baseline (or the --start-from kernel) fails, when the coder writes no code N times in a
row, or when the endpoint keeps failing (exit 3). Progress: a live display in a terminal, plain lines in
a log, nothing with --quiet.

LLM: --model/--base-url, else CUDA_LLM_MODEL / OPENAI_BASE_URL / OPENAI_API_KEY, else cuda-llm.toml.
Per role: --planner-model, --coder-model, --critic-model, and --ROLE-temperature, --ROLE-max-tokens,
--ROLE-reasoning-effort, --ROLE-extra-body; --coder-temperatures spreads temperatures over the candidates.

Who plays a role: --planner, --coder, --critic llm|manual|rules (default llm). `manual` means you (or
another agent) answer: the run writes each prompt to RUNS_DIR/<run-id>/pending/<role>-<candidate>.md and
stops, waiting; write the answer to answers/<role>-<candidate>.md (or `cuda-llm answer RUN NAME FILE`)
and `cuda-llm resume RUN_ID`. `rules` plays the planner with the feature bandit and the critic with the
rule-based diagnosis. `--coder manual --planner rules --critic rules` needs no endpoint and no key."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("task", help="task name from `cuda-llm tasks`, or a task folder")
    add_llm_arguments(p)
    add_budget_arguments(p)
    add_search_arguments(p)
    o = p.add_argument_group("run")
    o.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept (default ./runs)")
    add_gpu_arguments(o)
    o.add_argument("--no-profile", action="store_true", help="skip Nsight Compute profiling")
    o.add_argument("--no-learn", action="store_true", help="do not update the feature statistics")
    o.add_argument("--quiet", action="store_true", help="no progress lines (the final table is still printed)")
    o.add_argument("--start-from", type=Path, metavar="KERNEL.cu",
                   help="start from your kernel instead of the naive baseline (evaluated first; refused if it fails)")
    o.add_argument("--stage", action="append", default=[], type=parse_stage_arg, metavar="NAME[:POSITION]",
                   help="add a tool stage an installed package declares (`cuda-llm stages` lists them) after the stage "
                        "POSITION names, or at that index of the list (default: last); repeatable. Saved with the run")


def _err(msg: str) -> int:
    print(f"cuda-llm optimize: {msg}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    # 1. the LLM configuration, before anything else runs
    try:
        settings = load_settings(llm_cli(args))
    except LLMConfigError as exc:
        return _err(str(exc))
    # 2. the options and the task
    limits = limits_from_args(args)
    if isinstance(limits, str):
        return _err(limits)
    bad_gpus = check_gpus_arg(args.gpus)
    if bad_gpus:
        return _err(bad_gpus)
    from cuda_llm.tasks import TaskError, load_task   # here, not at the top: NumPy would slow every `--help`

    try:
        loaded = load_task(args.task)
    except (TaskError, KeyError, FileNotFoundError, ValueError) as exc:
        return _err(f"{exc} (list the tasks with `cuda-llm tasks`)")
    if args.start_from is not None and not args.start_from.is_file():
        return _err(f"--start-from {args.start_from}: no such file; give a .cu file defining {loaded.task.signature}")
    try:
        with_plugins(args.stage)      # each plugin imports and has its place, before anything is created
    except StageError as exc:
        return _err(f"--stage: {exc}")
    # 3. preflight: a GPU, nvcc, disk, the endpoint; nothing is created or spent when it fails
    if not preflight_ok("optimize", settings, runs_dir=args.runs_dir, arch=args.arch, profile=not args.no_profile):
        return 2
    options = RunOptions(limits=limits, runs_dir=args.runs_dir, arch=args.arch, timing_budget=timing_budget(args),
                         profile=not args.no_profile, learn=not args.no_learn, start_from=args.start_from,
                         gpus=args.gpus, stages=args.stage)
    out = start_run(loaded, settings, options, progress=make_progress(args.quiet))
    print_outcome(out)
    return exit_code(out)
