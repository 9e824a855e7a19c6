"""`cuda-llm resume RUN_ID`: continue a stopped or killed run from its last checkpoint."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, TypeVar

from cuda_llm.agents.errors import LLMConfigError
from cuda_llm.commands import one_line_errors
from cuda_llm.commands.flags import (
    add_role_arguments, parse_count, parse_duration, parse_gpus_arg, parse_tokens, saved_gpus_problem,
)
from cuda_llm.commands.outcome import exit_code, print_outcome
from cuda_llm.commands.preflight import preflight_ok
from cuda_llm.graph.run import (
    Extension, Keep, RunBusyError, chosen_gpus, gpus_text, resume_run, saved_options, settings_from_config,
    spends_nothing,
)
from cuda_llm.graph.stage_plugins import StageError, restore_stages
from cuda_llm.report.progress import make_progress
from cuda_llm.runs.rundir import RunDir, RunNotFoundError
from cuda_llm.tools.device.device_probe import has_cuda_device

T = TypeVar("T")

HELP = "continue a stopped or killed optimize run from its last checkpoint"
DESCRIPTION = """Continue RUN_ID (an id in --runs-dir, a unique prefix of one, "latest", or a run folder).

The run keeps its task, budgets and each role's settings (provider, model, endpoint, temperature, token
budget, from its config.json); API keys come from the environment (OPENAI_API_KEY) or --api-key. LLM
answers and measurements already made are read back from the run directory, not asked or measured again.
Time spent while the run was stopped does not count against its wall-clock budget.

A run waiting for answers (a role played manually) goes on once the answer files exist
(answers/<name>.md, or `cuda-llm answer RUN NAME FILE`). --planner/--coder/--critic change who plays a
role from now on (e.g. --coder manual to write the next kernels yourself), --ROLE-model its model.

A run whose roles spend nothing (each answered by hand or by the rules) may be resumed on a machine without a
GPU: it goes on through their turns (a manual critic's answer, the next plan, the next coder prompts) and stops,
resumable, at its next measurement, which a resume on the GPU machine makes.

A finished run continues with more budget: --rounds +5 (five rounds more than it ran), --time-budget +2h
(two more hours of wall-clock time), --token-budget +1M (a million more tokens); without the '+' the value
is the new total. The plateau count starts again, so the run goes on until a budget or a new plateau."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("run_id", help="run id, unique prefix, 'latest', or a run folder")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept (default ./runs)")
    p.add_argument("--api-key", help="API key when the environment has none")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--gpus", type=parse_gpus_arg, default=Keep.SAVED, metavar="0,1,2,3",
                   help="the GPUs to measure on from now on (indices among the visible GPUs, or all; default: the "
                        "ones the run was started with)")
    b = p.add_argument_group("more budget for a finished run ('+N' adds to what was used; 'N' is the new total)")
    b.add_argument("--rounds", type=_relative(parse_count("rounds")), metavar="[+]N", help="e.g. +5")
    b.add_argument("--time-budget", type=_relative(parse_duration), metavar="[+]DURATION", help="wall-clock, e.g. +2h")
    b.add_argument("--token-budget", type=_relative(parse_tokens), metavar="[+]TOKENS", help="e.g. +1M")
    add_role_arguments(p)
    for role in ("planner", "coder", "critic"):
        p.add_argument(f"--{role}-model", help=f"from now on, the {role}'s model (with --{role} llm)")


def _relative(parse_value: Callable[[str], T]) -> Callable[[str], tuple[bool, T]]:
    """'+5' -> (True, 5); '5' -> (False, 5), with the value parsed as optimize parses it."""
    def parse(text: str) -> tuple[bool, T]:
        t = str(text).strip()
        rel = t.startswith("+")
        return rel, parse_value(t[1:] if rel else t)
    return parse


def overrides(args: argparse.Namespace) -> dict[str, dict]:
    """role -> the settings the user changes on resume."""
    out: dict[str, dict] = {}
    for role in ("planner", "coder", "critic"):
        o = {"provider": getattr(args, role, None), "model": getattr(args, f"{role}_model", None)}
        o = {k: v for k, v in o.items() if v is not None}
        if o:
            out[role] = o
    return out


def run(args: argparse.Namespace) -> int:
    try:
        rundir = RunDir.open(args.run_id, args.runs_dir)
        config = rundir.load_config()
    except (RunNotFoundError, FileNotFoundError, ValueError) as exc:
        print(f"cuda-llm resume: {exc}", file=sys.stderr)
        return 2
    if config.get("replay"):   # recorded figures and new measurements must never mix in one run
        print(f"cuda-llm resume: run {rundir.run_id} is a replay of a recorded run (`cuda-llm demo`) and cannot go "
              f"on; start a run of your own with `cuda-llm optimize {config.get('task') or 'TASK'}`", file=sys.stderr)
        return 2
    try:   # a stage the run was started with and that cannot be imported now: refused, never dropped
        restore_stages(config.get("stages"), saved_options(config, args.runs_dir).stages, run_id=rundir.run_id)
    except StageError as exc:
        print(f"cuda-llm resume: {exc}", file=sys.stderr)
        return 2
    changes = overrides(args)
    try:
        settings = settings_from_config(config.get("llm") or {}, api_key=args.api_key, overrides=changes)
    except LLMConfigError as exc:
        print(f"cuda-llm resume: {exc}", file=sys.stderr)
        return 2
    saved = saved_options(config, args.runs_dir).gpus
    bad_gpus = saved_gpus_problem(saved, args.gpus, "this run", f"cuda-llm resume {rundir.run_id}")
    if bad_gpus:
        print(f"cuda-llm resume: {bad_gpus}", file=sys.stderr)
        return 2

    opts = config.get("options") or {}
    # answered by hand or by rules, on a machine without a GPU: it goes on until it must measure (MeasureLater)
    later = spends_nothing(settings, None) and not has_cuda_device()
    if not preflight_ok("resume", settings, runs_dir=args.runs_dir, arch=opts.get("arch"),
                        profile=bool(opts.get("profile", True)) and not later, gpu=not later):
        return 2
    if changes:   # later resumes keep who plays each role now
        rundir.save_config({**config, "llm": settings.redacted()})
    gpus = chosen_gpus(saved, args.gpus)
    if gpus != saved:
        print(f"cuda-llm resume: measuring on GPUs {gpus_text(gpus)} (--gpus) from now on, not {gpus_text(saved)} "
              "as the run was started", file=sys.stderr)
    elif saved is not None:
        print(f"cuda-llm resume: measuring on GPUs {gpus_text(saved)}, as the run was started (--gpus chooses "
              "others)", file=sys.stderr)

    extend = Extension(rounds=args.rounds, time_budget_s=args.time_budget, token_budget=args.token_budget)
    try:
        out = resume_run(str(rundir.root), args.runs_dir, settings=settings, progress=make_progress(args.quiet),
                         extend=extend or None, gpus=args.gpus)
    except (RunBusyError, RuntimeError) as exc:
        print(f"cuda-llm resume: {exc}", file=sys.stderr)
        return 2
    print_outcome(out)
    return exit_code(out)
