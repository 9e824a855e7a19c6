"""One module per `cuda-llm` subcommand (see cuda_llm/cli.py for the interface).

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
