"""One process at a time in a run (or batch) directory: an fcntl lock that the kernel releases when the
process dies, so a killed run can be resumed at once, and a second process is refused with the holder's pid."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any, Callable


class DirLock:
    """Exclusive, non-blocking lock on ``path`` for the life of a ``with`` block; ``busy(holder)`` is the
    exception raised when another process holds it (``holder``: "pid N", or "another process")."""

    def __init__(self, path: Path, busy: Callable[[str], Exception]):
        self.path = Path(path)
        self.busy = busy
        self.file: Any = None

    def __enter__(self) -> "DirLock":
        self.file = open(self.path, "a+")
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.file.seek(0)
            holder = self.file.read().strip() or "another process"
            self.file.close()
            raise self.busy(holder) from None
        self.file.seek(0)
        self.file.truncate()
        self.file.write(f"pid {os.getpid()}")
        self.file.flush()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.file is not None:
            self.file.close()
