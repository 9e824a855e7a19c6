"""The tests' own isolation (conftest.py, tests/isolation.py): the cache, the feature database and the runs of
a test session live in temporary folders, and a write into a protected folder is caught."""

from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
from pathlib import Path

from isolation import WriteGuard, inside, written_path

from cuda_llm.feature_db.stats import default_path
from cuda_llm.paths import atomic_write, cache_dir


def test_the_session_points_every_store_into_a_temporary_folder():
    from platformdirs import user_cache_dir

    tmp = Path(tempfile.gettempdir()).resolve()
    for path in (cache_dir(), default_path(), Path(user_cache_dir("cuda-llm"))):
        assert tmp in path.resolve().parents, path
    assert Path.home() / ".cache" not in [*cache_dir().parents, cache_dir()]


def test_written_path_tells_writes_from_reads():
    assert written_path("open", ("/x/a", "w", 0)) == "/x/a"
    assert written_path("open", ("/x/a", "rb", 0)) is None
    assert written_path("open", ("/x/a", None, os.O_RDONLY)) is None
    assert written_path("open", ("/x/a", None, os.O_WRONLY | os.O_CREAT)) == "/x/a"
    assert written_path("open", (3, "r", 0)) is None                       # an fd: nothing new is named
    assert written_path("os.rename", ("/t/.a.tmp", "/x/a")) == "/x/a"
    assert written_path("sqlite3.connect", (":memory:",)) is None
    assert inside("/x/a/b", [Path("/x/a")]) == Path("/x/a") and inside("/x/ab", [Path("/x/a")]) is None


def test_the_guard_catches_every_way_a_file_is_written(tmp_path):
    protected, free = tmp_path / "protected", tmp_path / "free"
    protected.mkdir()
    guard = WriteGuard([protected])
    sys.addaudithook(guard)      # hooks stay for the process; this one only records into its own list
    try:
        (free / "sub").mkdir(parents=True)
        atomic_write(free / "ok.txt", "fine")
        (free / "ok.txt").read_text()
        assert guard.hits == []
        (protected / "a.txt").write_text("x")
        atomic_write(protected / "b.json", "{}")                  # mkstemp (os.open O_CREAT) and os.replace
        sqlite3.connect(protected / "c.sqlite").close()
        (protected / "d").mkdir()
        (protected / "a.txt").read_text()                          # a read is no write
    finally:
        hits, guard.roots = list(guard.hits), []                   # later writes in the session are not its business
    assert any(h.startswith("open ") and h.endswith("a.txt") for h in hits)
    assert any(h.startswith("os.rename ") and h.endswith("b.json") for h in hits)
    assert any(h.startswith("sqlite3.connect ") for h in hits) and any(h.startswith("os.mkdir ") for h in hits)
    assert not any(str(free) in h for h in hits)
