"""One module per `cuda-llm` subcommand (see cuda_llm/cli.py for the interface); what several commands share has
its own module: flags.py (the shared flags and the checks of their values), outcome.py (the end of a run on the
command line) and preflight.py (the doctor's checks).

`cuda-llm --help` builds every command's parser, so a command imports at the top only what that start-up loads
anyway or what is small; a module that would slow it (NumPy through the tasks, the judge, the OpenAI client, Ray)
is imported inside the function that needs it, with a comment saying so.

May import: anything of the package.
"""

from __future__ import annotations

import argparse
from typing import NoReturn


def one_line_errors(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """A mistake on the command line gets one line that names the flag and the value (exit 2), not argparse's
    usage block before it: every command calls this first in add_arguments (`--help` still shows the usage)."""
    def error(message: str) -> NoReturn:
        parser.exit(2, f"{parser.prog}: {message} (see `{parser.prog} --help`)\n")

    parser.error = error  # type: ignore[method-assign]
    return parser
