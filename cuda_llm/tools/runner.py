"""Run the GPU worker in a child process: a timeout, the whole process group killed on expiry, and one
worker at a time per device (an fcntl lock in the cache directory), so timings never share the GPU."""

from __future__ import annotations

import fcntl
import os
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel

from cuda_llm.paths import cache_dir


class WorkerOutcome(BaseModel):
    rc: int | None                 # None when killed on timeout
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float                 # the worker's own run, lock wait excluded
    waited_s: float = 0.0          # time spent waiting for the device lock

    def stderr_tail(self, lines: int = 15) -> str:
        return "\n".join(self.stderr.strip().splitlines()[-lines:])

    def last_progress(self) -> str | None:
        prog = [ln for ln in self.stderr.splitlines() if ln.startswith("[gpu-worker]")]
        return re.sub(r"^\+[\d.]+s ", "", prog[-1].removeprefix("[gpu-worker]").strip()) if prog else None


def lock_path() -> Path:
    dev = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"
    return cache_dir() / ("gpu.lock" if dev == "0" else f"gpu{dev}.lock")


@contextmanager
def device_lock() -> Iterator[float]:
    """Hold the per-device lock; yields the seconds spent waiting for it."""
    t0 = time.perf_counter()
    with open(lock_path(), "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield time.perf_counter() - t0
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def worker_env() -> dict[str, str]:
    """The worker imports this package even from a checkout that is not installed."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def worker_argv(args: list[str], python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", "cuda_llm.tools.gpu_worker", *args]


def run_worker(argv: list[str], *, timeout_s: float, lock: bool = True) -> WorkerOutcome:
    """Run ``python -m cuda_llm.tools.gpu_worker *argv``; on timeout kill its process group.

    ``argv`` may also be a full command (starting with an executable path), used by tests.
    """
    cmd = argv if argv and (os.sep in argv[0] or argv[0].startswith("python")) else worker_argv(argv)
    if not lock:
        return _run(cmd, timeout_s, 0.0)
    with device_lock() as waited:
        return _run(cmd, timeout_s, waited)


def _run(cmd: list[str], timeout_s: float, waited: float) -> WorkerOutcome:
    from cuda_llm.tools.process_group import run_group

    got = run_group(cmd, timeout_s=timeout_s, env=worker_env())
    return WorkerOutcome(rc=got.rc, stdout=got.stdout, stderr=got.stderr, timed_out=got.timed_out,
                         seconds=got.seconds, waited_s=waited)
