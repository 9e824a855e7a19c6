"""How arrays travel between the parent and the GPU worker: .npy files in an exchange folder on tmpfs,
written with bulk write calls and memory-mapped read-only by the reader.

The worker copies device memory, 64 MB at a time, into a reused page-locked staging buffer (the fastest
device-to-host copy) and writes each chunk with one write call (worker_loop.hand_back); the parent maps
the file (no copy at all). Measured on a 64M-element float
output (benchmarks/transport_bench.py, figures in docs/harness.md), writing through a memory map paid a
page fault per 4 KiB of tmpfs and was slower than bulk writes; np.load without a map pays one more copy; a
pipe a copy plus the system calls and a parent that must read as fast as the worker writes. /dev/shm is
used when it has room for the evaluation; otherwise (a container's 64 MB /dev/shm) the folder goes beside
the cache, where the page cache still serves it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from cuda_llm.tools.harness.checker import RawCall

SHM = Path("/dev/shm")
HEADROOM = 1.25          # ask for this much more tmpfs than the estimate, and leave others room


def exchange_parent(need_bytes: int, fallback: Path, shm: Path = SHM) -> Path:
    """/dev/shm when it is writable and has ``need_bytes`` (x1.25) free, else ``fallback``."""
    try:
        if shm.is_dir() and os.access(shm, os.W_OK):
            st = os.statvfs(shm)
            if st.f_bavail * st.f_frsize >= need_bytes * HEADROOM:
                return shm
    except OSError:
        pass
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


PREFIX = "cuda-llm-x-"


def make_exchange(need_bytes: int, fallback: Path, shm: Path = SHM) -> Path:
    """A fresh private folder for one evaluation's arrays (removed with ``remove_exchange``). Folders that
    a killed evaluation left behind (their process is gone) are removed first: on tmpfs they hold memory."""
    for parent in {fallback, shm}:
        sweep_orphans(parent)
    parent = exchange_parent(need_bytes, fallback, shm)
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=parent))


def sweep_orphans(parent: Path) -> int:
    """Remove exchange folders whose process no longer runs; returns how many."""
    removed = 0
    try:
        found = [p for p in parent.iterdir() if p.name.startswith(PREFIX) and p.is_dir()]
    except OSError:
        return 0
    for p in found:
        pid = p.name[len(PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(p, ignore_errors=True)
        removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_exchange(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def write_array(path: Path, arr: np.ndarray) -> None:
    """A .npy file the other side maps: header and data in bulk write calls."""
    np.save(path, np.ascontiguousarray(arr), allow_pickle=False)


def read_array(path: Path) -> np.ndarray:
    """Map a .npy read-only (no copy); a zero-size array is read normally (it cannot be mapped)."""
    try:
        return np.load(path, mmap_mode="r")
    except ValueError:
        return np.load(path)


def read_call(folder: Path, outputs: list[str], inputs: list[str]) -> RawCall:
    """The raw data of one call as the worker left it: out_*.npy, after_*.npy (if written), guard.npy."""
    folder = Path(folder)
    outs = {n: read_array(folder / f"out_{n}.npy") for n in outputs if (folder / f"out_{n}.npy").exists()}
    after = {n: read_array(folder / f"after_{n}.npy") for n in inputs if (folder / f"after_{n}.npy").exists()}
    guard = folder / "guard.npy"
    return RawCall(outputs=outs, inputs_after=after, guards=read_array(guard) if guard.exists() else None)
