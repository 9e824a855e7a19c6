"""Running a child in its own process group under a time limit.

On timeout the whole group is killed: nvcc with cicc, ptxas and the host compiler; ncu with the program
it profiles; the GPU worker with anything a candidate forked. Nothing outlives the limit, and a hung
grandchild that still holds the pipes cannot block the caller either.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import NamedTuple, Sequence

DRAIN_S = 10.0   # after the kill: how long to wait for the pipes to close


class GroupRun(NamedTuple):
    rc: int | None          # None when killed at the time limit
    stdout: str
    stderr: str             # "" with merge_stderr (then everything is in stdout)
    timed_out: bool
    seconds: float


def run_group(cmd: Sequence[str], *, timeout_s: float, cwd: str | os.PathLike | None = None,
              env: dict[str, str] | None = None, merge_stderr: bool = False) -> GroupRun:
    """Run ``cmd`` in a new session; raises OSError only when it cannot be started at all."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                            text=True, errors="replace", start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return GroupRun(proc.returncode, out or "", err or "", False, time.perf_counter() - t0)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            out, err = proc.communicate(timeout=DRAIN_S)
        except subprocess.TimeoutExpired:
            out, err = "", ""
        return GroupRun(None, out or "", err or "", True, time.perf_counter() - t0)
