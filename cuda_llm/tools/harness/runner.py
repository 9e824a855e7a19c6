"""Run the GPU worker in a child process: a minimal environment with one pinned GPU, a fresh working
folder, a time limit (the whole process group killed on expiry), and one worker at a time per device (an
fcntl lock in the cache directory), so timings never share the GPU.

``run_worker`` runs a one-shot command (device-info, run-once). ``WorkerSession`` is the judge's
conversation with a serving worker: commands on its stdin, events on a channel of their own, each event
time-stamped on the parent's clock with when the worker sent it (tools/harness/event_channel.py; the cross-check of
the worker's times uses them).
"""

from __future__ import annotations

import fcntl
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel

from cuda_llm.paths import cache_dir
from cuda_llm.tools.harness.event_channel import EventChannel
from cuda_llm.tools.harness.worker_protocol import decode, encode
from cuda_llm.tools.compiler.process_group import run_group
from cuda_llm.tools.device import device_probe

# What the worker may inherit: what Python, the CUDA driver and runtime, and the package need. Nothing
# else a user set (API keys, tokens, proxies...) reaches candidate code.
ENV_KEEP = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "HOME", "LANG", "LC_ALL", "LC_CTYPE",
            "CUDA_HOME", "CUDA_PATH", "CUDA_DEVICE_ORDER", "CUDA_MODULE_LOADING", "CUDA_CACHE_PATH",
            "CUDA_CACHE_MAXSIZE", "CUDA_CACHE_DISABLE", "NVIDIA_DRIVER_CAPABILITIES", "SYSTEMROOT")
TAIL_CHARS = 64_000


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
        return last_progress(self.stderr)


def last_progress(stderr: str) -> str | None:
    prog = [ln for ln in stderr.splitlines() if ln.startswith("[gpu-worker]")]
    return re.sub(r"^\+[\d.]+s ", "", prog[-1].removeprefix("[gpu-worker]").strip()) if prog else None


# --------------------------------------------------------------------------------------- the device
def visible_devices(env: dict[str, str] | None = None) -> list[str] | None:
    """The parent's CUDA_VISIBLE_DEVICES as a list (None: not set, every device is visible)."""
    env = os.environ if env is None else env
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    return [d.strip() for d in raw.split(",") if d.strip()]


def pinned_device(gpu: int | None = None, env: dict[str, str] | None = None) -> str:
    """The CUDA_VISIBLE_DEVICES value for the worker: the ``gpu``-th device the parent sees (default the
    first), as the parent names it (an index, a UUID or a MIG id)."""
    index = 0 if gpu is None else gpu
    if index < 0:
        raise ValueError(f"gpu must be 0 or more, not {gpu}")
    seen = visible_devices(env)
    if seen is None:
        count = device_probe.cuda_device_count()       # None or 0 without a driver: nothing to check against here
        if count and index >= count:
            raise ValueError(f"gpu {index} is not visible: the driver reports {count} device(s)")
        return str(index)
    if index >= len(seen):
        raise ValueError(f"gpu {index} is not visible: CUDA_VISIBLE_DEVICES={','.join(seen) or '(empty)'} names "
                         f"{len(seen)} device(s)")
    return seen[index]


def lock_path(device: str | None = None) -> Path:
    dev = device if device is not None else pinned_device()
    slug = re.sub(r"[^A-Za-z0-9]+", "-", dev).strip("-") or "0"
    return cache_dir() / ("gpu.lock" if slug == "0" else f"gpu{slug}.lock")


@contextmanager
def device_lock(device: str | None = None) -> Iterator[float]:
    """Hold the per-device lock; yields the seconds spent waiting for it."""
    t0 = time.perf_counter()
    with open(lock_path(device), "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield time.perf_counter() - t0
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def worker_env(device: str | None = None, workdir: Path | None = None,
               base: dict[str, str] | None = None) -> dict[str, str]:
    """The worker's whole environment: the allowlist above, this package importable even from a checkout
    that is not installed, CUDA_VISIBLE_DEVICES pinned to one device, TMPDIR in the fresh folder."""
    base = dict(os.environ) if base is None else base
    env = {k: base[k] for k in ENV_KEEP if k in base}
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["CUDA_VISIBLE_DEVICES"] = device if device is not None else pinned_device(None, base)
    if workdir is not None:
        env["TMPDIR"] = str(workdir)
    return env


def worker_argv(args: list[str], python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", "cuda_llm.tools.harness.gpu_worker", *args]


def _command(argv: list[str]) -> list[str]:
    """``argv`` may also be a full command (starting with an executable path), used by tests."""
    return argv if argv and (os.sep in argv[0] or argv[0].startswith("python")) else worker_argv(argv)


def run_worker(argv: list[str], *, timeout_s: float, lock: bool = True, gpu: int | None = None) -> WorkerOutcome:
    """Run ``python -m cuda_llm.tools.harness.gpu_worker *argv`` in a fresh folder; on timeout kill its group."""
    device = pinned_device(gpu)
    if not lock:
        return _run(_command(argv), timeout_s, 0.0, device)
    with device_lock(device) as waited:
        return _run(_command(argv), timeout_s, waited, device)


def _run(cmd: list[str], timeout_s: float, waited: float, device: str) -> WorkerOutcome:
    with tempfile.TemporaryDirectory(prefix="cuda-llm-worker-") as work:
        got = run_group(cmd, timeout_s=timeout_s, env=worker_env(device, Path(work)), cwd=work)
    return WorkerOutcome(rc=got.rc, stdout=got.stdout, stderr=got.stderr, timed_out=got.timed_out,
                         seconds=got.seconds, waited_s=waited)


# ------------------------------------------------------------------------------------ the session
class WorkerGone(Exception):
    """The worker ended (or was killed at the time limit) before the event the parent waited for."""

    def __init__(self, rc: int | None, timed_out: bool):
        self.rc, self.timed_out = rc, timed_out
        super().__init__(f"worker ended (rc={rc}, timed out={timed_out})")


class Event(dict):
    """One event line from the worker, with ``at``: the parent's perf_counter when it arrived."""

    at: float = 0.0


def describe_exit(rc: int | None) -> str:
    """'exit code 3', 'signal 6 (SIGABRT)'."""
    if rc is None:
        return "killed at the time limit"
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = "unknown signal"
        return f"signal {-rc} ({name})"
    return f"exit code {rc}"


class WorkerSession:
    """A serving worker (``gpu_worker serve``): send commands, wait for events.

    The time limit counts only while the parent waits for the worker (``next_event``), not while it
    prepares data between commands. On expiry, or ``kill()``, the whole process group is killed.
    """

    def __init__(self, argv: list[str], *, timeout_s: float, device: str, workdir: Path):
        self.timeout_s = timeout_s
        self.used_s = 0.0
        self.started = time.perf_counter()
        self._events: queue.Queue[Event | None] = queue.Queue()
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        channel = EventChannel()
        cmd = [*_command(argv), "--events-fd", str(channel.child_fd)]
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         pass_fds=(channel.child_fd,), cwd=workdir, env=worker_env(device, workdir),
                                         start_new_session=True)
        except BaseException:
            channel.close()
            raise
        channel.close_child()
        self.stamped = channel.stamped       # event times are the kernel's send times (else: read times)
        self._threads = [threading.Thread(target=self._read_events, args=(channel,), daemon=True),
                         threading.Thread(target=self._drain, args=(self.proc.stdout, self._stdout), daemon=True),
                         threading.Thread(target=self._drain, args=(self.proc.stderr, self._stderr), daemon=True)]
        for t in self._threads:
            t.start()
        self.timed_out = False
        self.call_timed_out = False          # killed by the limit of one call, not the session's

    # readers ------------------------------------------------------------------------------------
    def _read_events(self, channel: EventChannel) -> None:
        try:
            for line, at in channel.lines():
                obj = decode(line)
                if obj is not None:
                    ev = Event(obj)
                    ev.at = at
                    self._events.put(ev)
        finally:
            self._events.put(None)

    @staticmethod
    def _drain(stream: Any, into: list[str]) -> None:
        size = 0
        for raw in iter(lambda: stream.readline(), b""):
            line = raw.decode(errors="replace")
            into.append(line)
            size += len(line)
            while size > TAIL_CHARS and len(into) > 1:      # keep the tail: a candidate may print without end
                size -= len(into.pop(0))

    # commands and events ------------------------------------------------------------------------
    def send(self, obj: dict[str, Any]) -> bool:
        """False when the worker no longer reads its stdin (it ended)."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(encode(obj))
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def next_event(self, limit_s: float | None = None) -> Event:
        """The next event; raises WorkerGone when the worker ended first, the session's time limit passed, or
        ``limit_s`` (the time left to the call of solve() in flight) passed first (then ``call_timed_out``)."""
        t0 = time.perf_counter()
        ev: Event | None
        while True:
            waited = time.perf_counter() - t0
            session_left = self.timeout_s - self.used_s - waited
            call_left = limit_s - waited if limit_s is not None else session_left
            left = min(session_left, call_left)
            try:
                ev = self._events.get(timeout=max(0.0, min(left, 0.5)))
                break
            except queue.Empty:
                pass
            if self.proc.poll() is not None:        # ended, but something it forked may hold the pipe open
                try:
                    ev = self._events.get(timeout=0.5)
                except queue.Empty:
                    ev = None
                break
            if left <= 0:
                self.used_s += time.perf_counter() - t0
                self.kill()
                self.timed_out = True
                self.call_timed_out = call_left < session_left
                raise WorkerGone(None, True)
        self.used_s += time.perf_counter() - t0
        if ev is None:
            self._events.put(None)                  # stays ended for later calls
            raise WorkerGone(self.wait(), False)
        return ev

    def wait(self, timeout: float = 10.0) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> int | None:
        """Ask the worker to quit, then make sure nothing of it is left; returns its exit code."""
        if self.proc.poll() is None:
            self.send({"cmd": "quit"})
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
            except OSError:
                pass
            rc = self.wait(10.0)
        else:
            rc = self.proc.returncode
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)     # anything the candidate forked
        except (ProcessLookupError, PermissionError):
            pass
        for t in self._threads:
            t.join(timeout=2.0)
        return rc

    @property
    def stdout(self) -> str:
        return "".join(self._stdout)

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started
