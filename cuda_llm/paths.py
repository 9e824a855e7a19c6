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


def atomic_write(path: Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
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
