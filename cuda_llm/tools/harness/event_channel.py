"""The channel a worker's events come back on, each message stamped with the time the worker sent it.

The judge checks the worker's timings against its own clock (timing_stats.clock_issues), from when each event
line reached it. Taken by the thread that reads the channel, that time is late whenever the thread waits: for
the GIL while another evaluation of the GPU pool validates outputs, or while the run's coders and LLM calls
work. A late reading bunches lines together and the check doubts an honest kernel, which then costs a whole
second evaluation. So on Linux the channel is a Unix SOCK_SEQPACKET socket pair with SO_TIMESTAMPNS: the
kernel stamps each message as the worker sends it, and the reader turns the stamp into this process's
``perf_counter`` time. A worker cannot forge the stamp; it can only send later, which makes its calls look
slower. Where the socket or the stamps are not available, the channel is a pipe and a line is stamped when it
is read, as before.

The worker side needs nothing special: it writes lines to the descriptor (``os.write``), in messages of at most
``MAX_MESSAGE`` bytes (``write_all``); a line longer than that arrives in pieces and takes the stamp of its
last piece.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import time
from collections.abc import Iterator

MAX_MESSAGE = 16 * 1024                      # bytes per write: far below a Unix socket's send buffer
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)   # Linux (asm-generic); absent from Python's socket module
_TIMESPEC = struct.Struct("qq")


class EventChannel:
    """One worker's events: ``child_fd`` goes to the worker (pass_fds), ``lines()`` yields (line, perf_counter
    time it was sent) in the parent. ``stamped`` says whether the times are the kernel's send times."""

    def __init__(self, *, prefer_stamps: bool = True):
        self._sock: socket.socket | None = None
        self._read_fd: int | None = None
        self.stamped = False
        child: int | None = None
        if prefer_stamps and sys.platform.startswith("linux"):
            try:
                parent, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                parent.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            except OSError:
                pass
            else:
                self._sock, self.stamped = parent, True
                child = child_sock.detach()
        if child is None:
            self._read_fd, child = os.pipe()
        self.child_fd: int | None = child

    def close_child(self) -> None:
        """After the worker started: the parent keeps no copy of the worker's end (so EOF comes when it ends)."""
        if self.child_fd is not None:
            os.close(self.child_fd)
            self.child_fd = None

    def _chunks(self) -> Iterator[tuple[bytes, float]]:
        """Raw messages (pipe: reads) and when they were sent (pipe: read), on this process's perf_counter."""
        if self._sock is None:
            assert self._read_fd is not None
            while True:
                chunk = os.read(self._read_fd, 1 << 16)
                at = time.perf_counter()
                if not chunk:
                    return
                yield chunk, at
        space = socket.CMSG_SPACE(_TIMESPEC.size)
        while True:
            try:
                data, anc, _flags, _ = self._sock.recvmsg(1 << 16, space)
            except OSError:
                return
            now, wall = time.perf_counter(), time.time()
            if not data:
                return
            yield data, min(now, now - (wall - _stamp(anc, wall)))

    def lines(self) -> Iterator[tuple[bytes, float]]:
        """Whole lines and the time of the message that completed each (the last line may lack its newline
        when the worker died mid-write: it is dropped, as a torn line)."""
        pending = b""
        try:
            for chunk, at in self._chunks():
                pending += chunk
                *whole, pending = pending.split(b"\n")
                for line in whole:
                    yield line, at
        finally:
            self.close()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        elif self._read_fd is not None:
            try:
                os.close(self._read_fd)
            except OSError:
                pass
            self._read_fd = None
        self.close_child()


def _stamp(ancillary: list[tuple[int, int, bytes]], default: float) -> float:
    """The kernel's send time (CLOCK_REALTIME seconds) from a message's ancillary data; ``default`` without."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            return sec + nsec * 1e-9
    return default


def write_all(fd: int, data: bytes) -> None:
    """Write ``data`` to an events descriptor in messages of at most MAX_MESSAGE bytes (a socket refuses a
    message larger than its buffer; a pipe takes any size)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view[:MAX_MESSAGE])
        view = view[n:]
