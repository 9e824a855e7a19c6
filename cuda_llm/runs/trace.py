"""The run's trace: one structlog JSON object per line in runs/<id>/trace.jsonl.

Each line is {"timestamp": ISO-8601 UTC, "event": name, ...fields}, appended and flushed as it is written,
so a run killed with SIGKILL loses at most the line being written; ``read_trace`` skips such a torn line,
and reopening the file for a resumed run starts on a fresh line. Read it with ``jq`` or ``read_trace``.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import IO, Any, Callable, Iterator

import structlog

Listener = Callable[[dict[str, Any]], None]
_RESERVED = ("timestamp", "event")


def _default(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, bytes):
        return obj.decode(errors="replace")
    return str(obj)


def _dumps(obj: Any, **kw: Any) -> str:
    kw.pop("default", None)  # structlog passes its own (repr); ours keeps models and paths readable
    return json.dumps(obj, default=_default, ensure_ascii=False, **kw)


class Tracer:
    """Writes trace events; thread-safe (parallel coders trace side by side). Use ``open_trace``."""

    def __init__(self, path: Path, file: IO[str], listeners: list[Listener] | None = None):
        self.path = Path(path)
        self._file = file
        self._listeners = list(listeners or [])
        self._closed = False
        self._lock = threading.Lock()
        self._log = structlog.wrap_logger(
            structlog.WriteLogger(file),
            processors=[
                structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
                _order_keys,
                structlog.processors.JSONRenderer(serializer=_dumps),
            ],
            cache_logger_on_first_use=True,
        )

    def add_listener(self, listener: Listener) -> None:
        """Also pass every event (as a dict) to ``listener``, e.g. console progress. Its errors are ignored."""
        self._listeners.append(listener)

    def event(self, name: str, **fields: Any) -> None:
        """Append one event. Field names "timestamp" and "event" are kept as "field_timestamp"/"field_event"."""
        for key in _RESERVED:
            if key in fields:
                fields[f"field_{key}"] = fields.pop(key)
        with self._lock:
            if self._closed:
                raise ValueError(f"trace {self.path} is closed")
            self._log.info(name, **fields)
        for listener in self._listeners:
            try:
                listener({"event": name, **fields})
            except Exception:  # noqa: BLE001 - a display problem never stops a run
                pass

    @contextmanager
    def node(self, name: str, **fields: Any) -> Iterator[dict[str, Any]]:
        """node_start / node_end events around a block, with its duration; an exception is recorded and re-raised.

        The yielded dict is merged into node_end, so a block can report what it did.
        """
        extra: dict[str, Any] = {}
        self.event("node_start", node=name, **fields)
        t0 = time.perf_counter()
        try:
            yield extra
        except BaseException as exc:
            if type(exc).__name__ == "GraphInterrupt":   # a manual role asked its question: waiting, not failing
                self.event("node_end", node=name, duration_s=round(time.perf_counter() - t0, 4), ok=False,
                           waiting=True, **{**fields, **extra})
                raise
            end = {**fields, **extra, "error": f"{type(exc).__name__}: {exc}"[:500]}
            self.event("node_end", node=name, duration_s=round(time.perf_counter() - t0, 4), ok=False, **end)
            raise
        self.event("node_end", node=name, duration_s=round(time.perf_counter() - t0, 4), ok=True, **{**fields, **extra})

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._file.close()

    def __enter__(self) -> "Tracer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _order_keys(_logger: Any, _method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """timestamp and event first, so that lines read well in a terminal."""
    head = {k: event_dict.pop(k) for k in _RESERVED if k in event_dict}
    return {**head, **event_dict}


def open_trace(path: Path | str, listeners: list[Listener] | None = None) -> Tracer:
    """A tracer appending to ``path`` (created with its folder if needed); a torn last line is closed first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torn = False
    if path.exists() and path.stat().st_size > 0:
        with open(path, "rb") as f:
            f.seek(-1, 2)
            torn = f.read(1) != b"\n"
    file = open(path, "a", encoding="utf-8", buffering=1)
    if torn:
        file.write("\n")
        file.flush()
    return Tracer(path, file, listeners)


def read_trace(path: Path | str) -> list[dict[str, Any]]:
    """Every event of a trace, in order; lines that are not complete JSON objects (a torn write) are skipped.

    A missing file reads as no events.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    events = []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            events.append(obj)
    return events
