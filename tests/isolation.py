"""Tests write only into their temporary folders: the user's cache (~/.cache/cuda-llm: builds, benchmark data,
the feature statistics) and the checkout's runs/ stay untouched. conftest.py points the cache, the feature
database and XDG_CACHE_HOME at a session folder (subprocesses inherit that), and an audit hook records any
write of this process that still reaches a protected folder, so the session fails and names it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def written_path(event: str, args: tuple[Any, ...]) -> str | None:
    """The path an audit event creates or changes, or None (reads, and events that touch no file)."""
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        mode, flags = (args[1], args[2]) if len(args) >= 3 else (None, 0)
        writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)
        return os.fsdecode(args[0]) if writes else None
    if event in ("os.mkdir", "os.remove", "os.rmdir", "os.truncate", "shutil.rmtree") and args:
        return os.fsdecode(args[0]) if isinstance(args[0], (str, bytes, os.PathLike)) else None
    if event == "os.rename" and len(args) >= 2:
        return os.fsdecode(args[1])
    if event == "sqlite3.connect" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        name = os.fsdecode(args[0])
        return None if name in ("", ":memory:") or name.startswith("file::memory:") else name
    return None


def inside(path: str, roots: Iterable[Path]) -> Path | None:
    """The protected root ``path`` lies in (relative paths are taken from the working folder), or None."""
    p = Path(os.path.abspath(path))
    return next((r for r in roots if p == r or r in p.parents), None)


class WriteGuard:
    """Records writes into ``roots`` (absolute folders) made by this process while installed."""

    def __init__(self, roots: Iterable[Path]) -> None:
        self.roots = [Path(os.path.abspath(r)) for r in roots]
        self.hits: list[str] = []

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in ("open", "os.mkdir", "os.remove", "os.rmdir", "os.truncate", "shutil.rmtree", "os.rename",
                         "sqlite3.connect"):
            return
        path = written_path(event, args)
        if path is not None and inside(path, self.roots) is not None and len(self.hits) < 50:
            self.hits.append(f"{event} {path}")
