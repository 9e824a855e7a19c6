"""The GPU pool's slots on this machine, one process each, so that the judges of two GPUs share no interpreter.

A judge is busy in Python while its GPU works: it reads the worker's events, fills and checks output buffers of
up to a few hundred MB, and cross-checks the clock. Two judges in one process take turns on one interpreter lock,
and each evaluation then takes longer side by side than alone. A ``ProcessSlot`` runs its GPU's evaluator in a
child process of its own (``serve``, in a Python started with this process's ``sys.path``): the pool's thread for that GPU hands
the job over a socket pair (length-prefixed pickles) and waits. The task goes as a ``TaskPayload`` (by name, or
its folder's path: same machine), the work folder is the caller's, and the result comes back by value.

The child ignores Ctrl-C (the run stops at its next step, as with threads) and ends when the pool closes, or
when the driving process is gone (its socket reaches end of file) once its current job is done. A child that
dies in the middle of a job (killed, out of memory, a harness fault) fails that job as a lost worker: the pool
re-queues it once for another GPU, and the slot starts a fresh child for its next job. An evaluator that raises
in the child fails the job the same way, with the child's traceback in the message.
"""

from __future__ import annotations

import pickle
import signal
import socket
import struct
import subprocess
import sys
import time
import traceback
from typing import Any

from cuda_llm.measure.slot_server import JOB_TIMEOUT_S, Factory, Payloads, SlotServer

START_TIMEOUT_S = 300.0            # the child's imports and its evaluator's device facts
_HEADER = struct.Struct("!Q")


class SlotProcessError(RuntimeError):
    """The slot's process failed a job (it died, hung, or its evaluator raised): a lost worker, not a bad kernel."""


# --------------------------------------------------------------------------------------------- framing
def send_message(sock: socket.socket, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_HEADER.pack(len(data)) + data)


def _exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("the other end closed the connection")
        buf += chunk
    return bytes(buf)


def recv_message(sock: socket.socket) -> Any:
    (size,) = _HEADER.unpack(_exactly(sock, _HEADER.size))
    return pickle.loads(_exactly(sock, size))


# ------------------------------------------------------------------------------------------ the parent
class ProcessSlot:
    """One GPU of this machine, its evaluator (``factory()``) in a child process (see the module docstring)."""

    def __init__(self, factory: Factory, label: str, *, timeout_s: float = JOB_TIMEOUT_S,
                 start_timeout_s: float = START_TIMEOUT_S):
        self.factory = factory
        self.label = label
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.info: dict[str, Any] = {}
        self.starts = 0
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._payloads = Payloads(by_files=False)      # same machine: a task folder is read where it is

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the child (it builds its evaluator while this returns; ``ready`` waits for it)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # the child imports what this process imports, from where it does (sys.path as it is here: the package,
        # and the folder of a factory's class, need not be installed)
        boot = (f"import sys; sys.path[:] = {list(sys.path)!r}; "
                f"from cuda_llm.measure.process_slots import serve; sys.exit(serve({theirs.fileno()}))")
        try:
            self._proc = subprocess.Popen([sys.executable, "-c", boot], pass_fds=(theirs.fileno(),),
                                          stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            theirs.close()
        self._sock = ours
        self.starts += 1
        send_message(ours, {"factory": pickle.dumps(self.factory)})

    def ready(self) -> dict[str, Any]:
        """Wait for the child's evaluator: its arch and device facts, or a RuntimeError with its traceback."""
        assert self._sock is not None
        self._sock.settimeout(self.start_timeout_s)
        try:
            status, value = recv_message(self._sock)
        except (OSError, EOFError) as exc:
            self._stop()
            raise RuntimeError(f"GPU {self.label}'s evaluator process did not start ({type(exc).__name__}: {exc}; "
                               f"exit code {self._returncode()})") from None
        if status != "ready":
            self._stop()
            raise RuntimeError(f"GPU {self.label}'s evaluator could not be built in its process:\n{value}")
        self.info = value
        return value

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and self._sock is not None

    def _returncode(self) -> int | None:
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return None

    def run(self, kind: str, args: tuple[Any, ...]) -> Any:
        if not self._alive():
            self._stop()
            self.start()
            self.ready()
        assert self._sock is not None
        self._sock.settimeout(self.timeout_s)
        try:
            send_message(self._sock, ("job", kind, self._payloads.of(args[0]), tuple(args[1:])))
            status, value = recv_message(self._sock)
        except (OSError, EOFError) as exc:         # died, or no answer within timeout_s (socket.timeout)
            self._stop()
            raise SlotProcessError(f"GPU {self.label}'s evaluator process was lost during {kind} "
                                   f"({type(exc).__name__}: {exc}; exit code {self._returncode()})") from None
        if status == "ok":
            return value
        raise SlotProcessError(f"GPU {self.label}'s evaluator raised during {kind}: {value}")

    def _stop(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def close(self) -> None:
        """Ask the child to finish (it closes its evaluator), then make sure it is gone."""
        if self._alive():
            assert self._sock is not None and self._proc is not None
            try:
                send_message(self._sock, ("close",))
                self._proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._stop()


def start_slots(slots: list[ProcessSlot]) -> list[dict[str, Any]]:
    """Start every slot's child at once and wait for them all (their imports and device facts overlap); if one
    fails, every one is stopped and its error raised."""
    try:
        for s in slots:
            s.start()
        return [s.ready() for s in slots]
    except BaseException:
        for s in slots:
            s.close()
        raise


# ------------------------------------------------------------------------------------------- the child
def _failure_text(exc: BaseException, note: str = "") -> str:
    """The error first (what the pool's trace event shows), then where it came from."""
    return f"{type(exc).__name__}: {exc}{note}\n" + "".join(traceback.format_exception(exc, limit=6))


def serve(fd: int) -> int:
    """The child: build the evaluator, then run jobs until told to close or the parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)          # Ctrl-C is the parent's to handle
    sock = socket.socket(fileno=fd)
    try:
        boot = recv_message(sock)
    except (OSError, EOFError):
        return 1
    try:
        server = SlotServer(pickle.loads(boot["factory"]))
        send_message(sock, ("ready", server.describe()))
    except BaseException as exc:  # noqa: BLE001 - the parent says why the GPU's evaluator could not be built
        try:
            send_message(sock, ("error", _failure_text(exc)))
        except OSError:
            pass
        return 1
    try:
        while True:
            try:
                msg = recv_message(sock)
            except (OSError, EOFError):
                break                                   # the parent is gone
            if msg[0] == "close":
                break
            _, kind, task, args = msg
            t0 = time.perf_counter()
            try:
                reply: tuple[str, Any] = ("ok", server.run(kind, task, args))
            except BaseException as exc:  # noqa: BLE001 - a harness fault: the parent re-queues the job
                reply = ("error", _failure_text(exc, f" (after {time.perf_counter() - t0:.1f} s)"))
            try:
                send_message(sock, reply)
            except (pickle.PicklingError, TypeError, AttributeError) as exc:
                send_message(sock, ("error", f"the result of {kind} could not be sent back: {exc}"))
            except OSError:
                break
    finally:
        server.close()
    return 0
