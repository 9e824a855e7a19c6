"""Where cuda-llm keeps things between runs (the compile cache, measured device peaks, feature statistics), and the
one atomic file write every layer uses (a kill never leaves half a file)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

CACHE_ENV = "CUDA_LLM_CACHE"


def cache_dir() -> Path:
    """$CUDA_LLM_CACHE, else the user's cache directory (e.g. ~/.cache/cuda-llm). Created on first use."""
    env = os.environ.get(CACHE_ENV)
    if env:
        path = Path(env).resolve()      # absolute: child processes (the GPU worker) run in folders of their own
    else:
        from platformdirs import user_cache_dir

        path = Path(user_cache_dir("cuda-llm"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def current_umask() -> int:
    """The process's umask, read without changing it where Linux shows it (setting it to read it back would,
    for a moment, change the mode of files other threads create)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename. The file gets the
    mode an ordinary write would (0644 under umask 022), not mkstemp's owner-only 0600, so a teammate or a
    web server can read the reports."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path
