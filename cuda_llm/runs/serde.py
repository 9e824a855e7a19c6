"""Checkpoint serialization: LangGraph's own (JsonPlus/msgpack), zlib-compressed.

The SQLite checkpointer stores the whole state after every step; compressed, a round of four candidates
costs a few KiB instead of tens. Blobs written uncompressed (by an older version) still load.
"""

from __future__ import annotations

import zlib
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

PREFIX = "z:"
MIN_SIZE = 256  # smaller blobs are stored as they are


class CompressedSerializer:
    def __init__(self, inner: Any | None = None, level: int = 6):
        self.inner = inner or JsonPlusSerializer()
        self.level = level

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type_, data = self.inner.dumps_typed(obj)
        if len(data) >= MIN_SIZE:
            return PREFIX + type_, zlib.compress(data, self.level)
        return type_, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, blob = data
        if type_.startswith(PREFIX):
            return self.inner.loads_typed((type_[len(PREFIX):], zlib.decompress(blob)))
        return self.inner.loads_typed((type_, blob))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
