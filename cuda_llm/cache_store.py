"""The cache directory's size cap: usage per kind, least-recently-used eviction of whole entries, clearing.

Everything cuda-llm keeps between runs lives in ``paths.cache_dir()``, one folder per kind (``builds``,
``benchdata``, ``baselines``, ``profiles``, ``evals``, ``devices``); an *entry* is one child of a kind
folder (a build folder, one input set of benchmark data, one baseline JSON file). An overnight run must
not fill the disk, so the whole directory is held under a cap (default 20 GB; ``CUDA_LLM_CACHE_MAX_GB``, or
``max_gb`` in the ``[cache]`` table of cuda-llm.toml) by removing the entries used longest ago.

An entry in use is never removed: users hold a shared ``flock`` on the entry's lock file (``in_use``), and
eviction removes an entry only under an exclusive, non-blocking lock of the same file. "Used" is the
entry's modification time, which ``touch`` (and ``in_use``) set to now.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
import tomllib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from cuda_llm.paths import cache_dir

DEFAULT_MAX_GB = 20.0
MAX_GB_ENV = "CUDA_LLM_CACHE_MAX_GB"
CONFIG_ENV = "CUDA_LLM_CONFIG"
CONFIG_FILE = "cuda-llm.toml"
LOCK_NAME = ".in-use.lock"
# Kinds whose entries the cap may evict. ``devices`` (measured peaks, a few hundred bytes each) is only
# removed by an explicit ``cuda-llm cache clear``; files at the top level (the feature statistics
# database, device locks) are never entries.
EVICTABLE = ("benchdata", "builds", "baselines", "profiles", "evals")
CLEARABLE = EVICTABLE + ("devices",)


class CacheConfigError(ValueError):
    """A cache size setting that cannot be used; the message names where it came from."""


@dataclass(frozen=True)
class Entry:
    kind: str
    path: Path
    bytes: int
    last_used: float


# ------------------------------------------------------------------------------------------ settings
def max_bytes(env: dict[str, str] | None = None, config: Path | None = None) -> int:
    """The cap in bytes: $CUDA_LLM_CACHE_MAX_GB, else ``[cache] max_gb`` in cuda-llm.toml, else 20 GB."""
    env = dict(os.environ) if env is None else env
    raw = env.get(MAX_GB_ENV)
    if raw not in (None, ""):
        return _gb(raw, f"${MAX_GB_ENV}")
    path = config or (Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else Path.cwd() / CONFIG_FILE)
    if path.is_file():
        try:
            table = tomllib.loads(path.read_text()).get("cache", {})
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise CacheConfigError(f"{path}: cannot read the [cache] table: {exc}") from None
        if not isinstance(table, dict):
            raise CacheConfigError(f"{path}: [cache] must be a table")
        if "max_gb" in table:
            return _gb(table["max_gb"], f"{path} [cache] max_gb")
    return int(DEFAULT_MAX_GB * 1e9)


def _gb(value: object, where: str) -> int:
    try:
        gb = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise CacheConfigError(f"{where} = {value!r}: expected a number of gigabytes, e.g. 20") from None
    if not gb > 0:
        raise CacheConfigError(f"{where} = {value!r}: the cache cap must be more than 0 GB")
    return int(gb * 1e9)


# ------------------------------------------------------------------------------------------- entries
def _size(path: Path) -> int:
    try:
        st = path.lstat()
    except OSError:
        return 0
    if not path.is_dir() or path.is_symlink():
        return st.st_size
    total = 0
    stack = [path]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                for e in it:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(Path(e.path))
                        else:
                            total += e.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def entries(root: Path | None = None, kinds: Iterable[str] | None = None) -> list[Entry]:
    """Every entry of the given kinds (default: every kind folder), oldest use first. Names starting with
    a dot (a build or a data set being written) are not entries yet."""
    root = Path(root or cache_dir())
    out: list[Entry] = []
    try:
        folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return out
    wanted = set(kinds) if kinds is not None else None
    for folder in folders:
        if wanted is not None and folder.name not in wanted:
            continue
        try:
            children = list(folder.iterdir())
        except OSError:
            continue
        for p in children:
            if p.name.startswith("."):
                continue
            try:
                used = p.stat().st_mtime
            except OSError:
                continue
            out.append(Entry(folder.name, p, _size(p), used))
    out.sort(key=lambda e: e.last_used)
    return out


def usage(root: Path | None = None) -> dict[str, tuple[int, int]]:
    """{kind: (entries, bytes)}; files at the top level (feature statistics, locks) under "other"."""
    root = Path(root or cache_dir())
    out: dict[str, tuple[int, int]] = {}
    for e in entries(root):
        n, b = out.get(e.kind, (0, 0))
        out[e.kind] = (n + 1, b + e.bytes)
    other = [p for p in _safe_iter(root) if not p.is_dir()]
    hidden = [p for p in _safe_iter(root) if p.is_dir() and p.name.startswith(".")]
    if other or hidden:
        out["other"] = (len(other) + len(hidden), sum(_size(p) for p in other + hidden))
    return out


def total_bytes(root: Path | None = None) -> int:
    return sum(b for _, b in usage(root).values())


def _safe_iter(root: Path) -> list[Path]:
    try:
        return list(root.iterdir())
    except OSError:
        return []


def touch(path: Path) -> None:
    """Mark an entry as used now (its modification time is its place in the eviction order)."""
    try:
        os.utime(path)
    except OSError:
        pass


def _lock_file(entry: Path) -> Path:
    return entry / LOCK_NAME if entry.is_dir() else entry.with_name(f".{entry.name}{LOCK_NAME}")


@contextmanager
def in_use(entry: Path) -> Iterator[bool]:
    """Hold a shared lock on ``entry`` for the duration (eviction skips it) and mark it used. Yields False
    when the entry does not exist (any more): the caller makes it again."""
    entry = Path(entry)
    if not entry.exists():
        yield False
        return
    try:
        fh = open(_lock_file(entry), "a+")
    except OSError:
        yield False
        return
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
        alive = entry.exists()
        if alive:
            touch(entry)
        yield alive
    finally:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        finally:
            fh.close()


def remove(entry: Path) -> bool:
    """Remove one entry unless it is in use; True if it was removed (or was already gone)."""
    entry = Path(entry)
    if not entry.exists():
        return True
    lock = _lock_file(entry)
    try:
        fh = open(lock, "a+")
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if entry.is_dir() and not entry.is_symlink():
            # rename first: a reader that opens the entry now finds it missing, never half deleted
            trash = entry.with_name(f".evicted-{entry.name}-{os.getpid()}-{time.monotonic_ns()}")
            try:
                os.rename(entry, trash)
            except OSError:
                return False
            shutil.rmtree(trash, ignore_errors=True)
        else:
            try:
                entry.unlink()
            except FileNotFoundError:
                pass
            except OSError:
                return False
            try:
                lock.unlink()
            except OSError:
                pass
        return True
    finally:
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        fh.close()


def enforce_cap(root: Path | None = None, limit: int | None = None, *, keep: Iterable[Path] = ()) -> list[Entry]:
    """Remove least-recently-used entries of the evictable kinds until the whole cache is within ``limit``
    (default ``max_bytes()``). Entries in use, and those in ``keep``, stay. Returns what was removed."""
    root = Path(root or cache_dir())
    limit = max_bytes() if limit is None else limit
    total = total_bytes(root)
    if total <= limit:
        return []
    kept = {Path(p).resolve() for p in keep}
    removed: list[Entry] = []
    for e in entries(root, EVICTABLE):
        if total <= limit:
            break
        if e.path.resolve() in kept:
            continue
        if remove(e.path):
            removed.append(e)
            total -= e.bytes
    return removed


def clear(root: Path | None = None, kinds: Iterable[str] | None = None) -> tuple[list[Entry], list[Entry]]:
    """Remove every entry of ``kinds`` (default: every clearable kind). Returns (removed, in use and kept)."""
    root = Path(root or cache_dir())
    chosen = tuple(kinds) if kinds is not None else CLEARABLE
    unknown = sorted(set(chosen) - set(CLEARABLE))
    if unknown:
        raise ValueError(f"unknown cache kind(s) {', '.join(unknown)}; kinds are {', '.join(CLEARABLE)}")
    removed, busy = [], []
    for e in entries(root, chosen):
        (removed if remove(e.path) else busy).append(e)
    return removed, busy
