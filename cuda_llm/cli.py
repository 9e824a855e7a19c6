"""The `cuda-llm` command line. Each subcommand lives in its own module under cuda_llm/commands/.

A command module defines HELP (one line), DESCRIPTION (for --help), add_arguments(parser) and
run(args) -> exit code. Modules are imported only to build the parser, so they keep heavy imports
(LangGraph, the compiler, the GPU worker) inside run().
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS: dict[str, str] = {
    "tasks": "cuda_llm.commands.tasks_cmd",
    "eval": "cuda_llm.commands.eval_cmd",
    "optimize": "cuda_llm.commands.optimize_cmd",
    "resume": "cuda_llm.commands.resume_cmd",
    "runs": "cuda_llm.commands.runs_cmd",
    "report": "cuda_llm.commands.report_cmd",
    "trace": "cuda_llm.commands.trace_cmd",
    "features": "cuda_llm.commands.features_cmd",
    "profile": "cuda_llm.commands.profile_cmd",
    "import": "cuda_llm.commands.import_cmd",
    "export": "cuda_llm.commands.export_cmd",
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
