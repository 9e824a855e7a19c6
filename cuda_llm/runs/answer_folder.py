"""A folder of hand-written kernels that answers a manual coder's prompts (benchmarks/manual_run.py with
benchmarks/manual_answers/), so that a run played "by hand" repeats without a person at the keyboard.

The first turn of prompt ``coder-r<N>c<K>`` (names: runs.rundir.exchange_name) is answered by
``FOLDER/r<N>c<K>.cu``, else by ``FOLDER/r<N>.cu`` (one kernel for the whole round). A later turn of the same
conversation (``coder-r<N>c<K>-2``: a compile fix, a correction) and the other roles have no prepared
answer: the caller stops there and shows the prompt.
"""

from __future__ import annotations

import re
from pathlib import Path

_FIRST_CODER_TURN = re.compile(r"coder-(r(\d+)c\d+)")


def answer_file(folder: Path, name: str) -> Path | None:
    """coder-r2c0 -> FOLDER/r2c0.cu or FOLDER/r2.cu, whichever exists first; None when neither does, for a
    later turn (coder-r2c0-2) and for another role."""
    m = _FIRST_CODER_TURN.fullmatch(name)
    if not m:
        return None
    for cand in (folder / f"{m.group(1)}.cu", folder / f"r{m.group(2)}.cu"):
        if cand.is_file():
            return cand
    return None


def coder_answer(file_name: str, source: str) -> str:
    """The answer to a coder prompt: the kernel in one ```cuda block, as the prompt asks."""
    return f"My kernel for this round is {file_name}.\n\n```cuda\n{source.rstrip()}\n```\n"
