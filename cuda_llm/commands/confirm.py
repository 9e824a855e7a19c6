"""Asking before deleting: one question on the terminal, or --yes; never a silent yes from a pipe."""

from __future__ import annotations

import sys


def confirm(question: str, *, yes: bool, command: str) -> bool:
    """True to go ahead. Without --yes, ask on a terminal; refuse (saying to pass --yes) when stdin is not one."""
    if yes:
        return True
    if not sys.stdin or not sys.stdin.isatty():
        print(f"cuda-llm {command}: {question} Not confirmed (no terminal to ask on): pass --yes", file=sys.stderr)
        return False
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")
