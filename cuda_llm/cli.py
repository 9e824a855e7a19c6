"""The `cuda-llm` command line. Each subcommand lives in its own module under cuda_llm/commands/.

A command module defines HELP (one line), DESCRIPTION (for --help), add_arguments(parser) and
run(args) -> exit code. Modules are imported only to build the parser, so they keep heavy imports
(LangGraph, the compiler, the GPU worker) inside run().
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMANDS: dict[str, str] = {
    "tasks": "cuda_llm.commands.tasks_cmd",
    "eval": "cuda_llm.commands.eval_cmd",
    "optimize": "cuda_llm.commands.optimize_cmd",
    "resume": "cuda_llm.commands.resume_cmd",
    "answer": "cuda_llm.commands.answer_cmd",
    "runs": "cuda_llm.commands.runs_cmd",
    "report": "cuda_llm.commands.report_cmd",
    "trace": "cuda_llm.commands.trace_cmd",
    "features": "cuda_llm.commands.features_cmd",
    "profile": "cuda_llm.commands.profile_cmd",
    "doctor": "cuda_llm.commands.doctor_cmd",
    "show": "cuda_llm.commands.show_cmd",
    "check-task": "cuda_llm.commands.check_task_cmd",
    "cache": "cuda_llm.commands.cache_cmd",
    "tune": "cuda_llm.commands.tune_cmd",
    "import": "cuda_llm.commands.import_cmd",
    "export": "cuda_llm.commands.export_cmd",
    "batch": "cuda_llm.commands.batch_cmd",
    "demo": "cuda_llm.commands.demo_cmd",
    "stages": "cuda_llm.commands.stages_cmd",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cuda-llm",
        description=(
            "Optimize CUDA kernels with LLM agents. Every candidate is compiled with nvcc, tested against a "
            "NumPy reference on many shapes (some never shown to the LLM), and timed on the real GPU."
        ),
        epilog="Run 'cuda-llm COMMAND --help' for the options of one command.",
    )
    parser.add_argument("--version", action="version", version=f"cuda-llm {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        p = sub.add_parser(
            name,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cuda-llm")
    except PackageNotFoundError:   # run from a source tree that was not installed
        return "unknown (not installed)"


def _quiet_broken_pipe() -> int:
    """`cuda-llm features | head`: the reader left; end quietly, like other command-line tools."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141   # 128 + SIGPIPE, what a shell reports for a program ended by a closed pipe


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        code = int(args._run(args) or 0)
        sys.stdout.flush()      # a closed pipe shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
