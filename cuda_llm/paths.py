"""Where cuda-llm keeps things between runs: the compile cache, measured device peaks, feature statistics."""

from __future__ import annotations

import os
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
