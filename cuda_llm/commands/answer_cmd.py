"""`cuda-llm answer RUN NAME FILE`: answer a prompt that a run waits on (a role played manually)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cuda_llm.commands import one_line_errors, resume_cmd
from cuda_llm.graph.manual import pending_prompts, write_answer
from cuda_llm.runs.rundir import RunDir, RunNotFoundError

HELP = "answer a prompt that a run is waiting on (a role played manually), or list what it waits on"
DESCRIPTION = """Store FILE as the answer to the pending prompt NAME of RUN_ID, then continue the run with
`cuda-llm resume RUN_ID` (or pass --resume).

A role played by `manual` (optimize --coder manual, say) writes each prompt to
RUNS_DIR/<run-id>/pending/<name>.md, named by role and candidate: coder-r1c0, coder-r1c0-2 for a second
turn of the same conversation (a compile fix), planner-r2, critic-r1c3. The coder's answer is one complete
CUDA file in a ```cuda block; the planner's and the critic's a JSON object (the prompt shows its schema).
Writing RUNS_DIR/<run-id>/answers/<name>.md yourself does the same as this command.

Without NAME and FILE, lists the prompts RUN_ID waits on."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("run_id", help="run id, unique prefix, 'latest', or a run folder")
    p.add_argument("name", nargs="?", help="the pending prompt, e.g. coder-r1c0")
    p.add_argument("file", nargs="?", help="the answer ('-' reads it from standard input)")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept (default ./runs)")
    p.add_argument("--resume", action="store_true", help="continue the run once the answer is stored")


def _err(msg: str) -> int:
    print(f"cuda-llm answer: {msg}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    try:
        rundir = RunDir.open(args.run_id, args.runs_dir)
    except (RunNotFoundError, ValueError) as exc:
        return _err(str(exc))
    if args.name is None:
        waiting = pending_prompts(rundir.root)
        if not waiting:
            print(f"{rundir.run_id} waits on no prompt")
        for w in waiting:
            print(w.instructions(rundir.run_id))
        return 0
    if args.file is None:
        return _err("give the answer FILE (or '-' for standard input) after the prompt's name")
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
    except OSError as exc:
        return _err(f"cannot read {args.file}: {exc.strerror or exc}")
    try:
        path = write_answer(rundir.root, args.name, text)
    except (FileNotFoundError, ValueError) as exc:
        return _err(str(exc))
    left = pending_prompts(rundir.root)
    print(f"stored {path}" + (f"; still waiting on {', '.join(w.name for w in left)}" if left else ""))
    if not args.resume:
        print(f"continue with `cuda-llm resume {rundir.run_id}`")
        return 0

    ns = argparse.Namespace(run_id=str(rundir.root), runs_dir=args.runs_dir, api_key=None, quiet=False,
                            planner=None, coder=None, critic=None, planner_model=None, coder_model=None,
                            critic_model=None)
    return resume_cmd.run(ns)
