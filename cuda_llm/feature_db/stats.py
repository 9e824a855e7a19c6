"""What every measured candidate taught us about each feature, kept in SQLite across runs and processes.

One row per (feature, task category, GPU architecture): how often a candidate using the feature was
tried, compiled and passed, and the running mean and variance (Welford) of its log-speedup over its
parent candidate. Every ``record`` also appends one row to an ``events`` log, so the aggregates can be
audited or rebuilt. An event may carry a key (the graph uses run/candidate/source hash): a second record
with the same key is ignored, so a step replayed after a resume never counts a candidate twice.

Concurrency: several runs (threads or processes) may share one file. WAL mode lets readers go on while
one writer commits; every update is a ``BEGIN IMMEDIATE`` transaction (read-modify-write under the
write lock) and waits up to ``busy_timeout`` for the lock instead of failing. Each call opens its own
connection, so a store object may be used from any thread and survives ``fork``.
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel

from cuda_llm.feature_db.catalogue import arch_name, parse_arch

DB_ENV = "CUDA_LLM_FEATURE_DB"
DB_FILENAME = "feature_stats.sqlite"
SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 60_000
_ID = re.compile(r"^[a-z][a-z0-9_]*$")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS feature_stats (
    feature TEXT NOT NULL,
    category TEXT NOT NULL,
    arch TEXT NOT NULL,
    tries INTEGER NOT NULL DEFAULT 0,
    compiled INTEGER NOT NULL DEFAULT 0,
    passed INTEGER NOT NULL DEFAULT 0,
    n_speedups INTEGER NOT NULL DEFAULT 0,
    sum_log_speedup REAL NOT NULL DEFAULT 0,
    mean_log_speedup REAL NOT NULL DEFAULT 0,
    m2_log_speedup REAL NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL,
    PRIMARY KEY (feature, category, arch)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    arch TEXT NOT NULL,
    category TEXT NOT NULL,
    features TEXT NOT NULL,
    compiled INTEGER NOT NULL,
    passed INTEGER NOT NULL,
    speedup REAL,
    key TEXT
);
"""
# Added to schema 1 in place (older files get the column; older readers ignore it).
_EVENT_KEY = "CREATE UNIQUE INDEX IF NOT EXISTS events_by_key ON events (key)"


class StatsStoreError(RuntimeError):
    """The statistics file cannot be used; the message names the file and what to do."""


class FeatureStats(BaseModel):
    """Learned numbers for one feature in one task category on one architecture."""

    feature: str
    category: str
    arch: str
    tries: int = 0
    compiled: int = 0
    passed: int = 0
    n_speedups: int = 0
    sum_log_speedup: float = 0.0
    mean_log_speedup: float = 0.0
    var_log_speedup: float = 0.0   # sample variance (n - 1); 0 below two speedups

    @property
    def mean_speedup(self) -> float | None:
        """Geometric-mean speedup over the parent, None before any was measured."""
        return math.exp(self.mean_log_speedup) if self.n_speedups else None

    @property
    def failures(self) -> int:
        """Tries that did not compile or did not pass the tests."""
        return self.tries - self.passed


def default_path() -> Path:
    """$CUDA_LLM_FEATURE_DB, else <cache dir>/feature_stats.sqlite."""
    env = os.environ.get(DB_ENV)
    if env:
        return Path(env).expanduser()
    from cuda_llm.paths import cache_dir

    return cache_dir() / DB_FILENAME


def normalize_arch(arch: str) -> str:
    """'sm_90a', 'compute_90', '9.0' -> 'sm_90', so one GPU's statistics land in one row."""
    return arch_name(parse_arch(arch))


def features_to_credit(asked: Iterable[str], detected: Iterable[str], parent_detected: Iterable[str] = ()) -> list[str]:
    """The features a candidate's outcome should be credited to: those the planner asked for, plus those
    detected in its source that its parent did not already use (a feature inherited unchanged from the
    parent did not cause the change in speed)."""
    parent = set(parent_detected)
    out = dict.fromkeys(asked)
    out.update(dict.fromkeys(f for f in detected if f not in parent))
    return list(out)


@contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """A transaction holding the database's write lock from its start: committed, or rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class StatsStore:
    """Feature statistics in one SQLite file (see the module docstring for the concurrency rules)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StatsStoreError(f"{self.path}: cannot create its folder ({exc}); pass another path (--db or ${DB_ENV})") from None
        self._init_schema()

    # -- connection ---------------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as exc:
            raise StatsStoreError(f"{self.path}: cannot open the feature statistics ({exc}); "
                                  f"pass another path (--db or ${DB_ENV})") from None
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on a fresh connection."""
        conn = self._connect()
        try:
            with _immediate(conn):
                yield conn
        except sqlite3.Error as exc:
            raise StatsStoreError(f"{self.path}: cannot write the feature statistics ({exc}); check the file's "
                                  f"permissions and free space, or pass another path (--db or ${DB_ENV})") from None
        finally:
            conn.close()

    def _init_schema(self) -> None:
        conn = self._connect()
        try:
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            except sqlite3.DatabaseError as exc:
                raise StatsStoreError(f"{self.path}: not a feature statistics database ({exc}); "
                                      f"move it away or pass another path (--db or ${DB_ENV})") from None
            if str(mode).lower() != "wal":
                # e.g. a file system without shared memory: still correct, only readers wait for writers.
                conn.execute("PRAGMA journal_mode = DELETE")
            with _immediate(conn):
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if "meta" in tables:
                    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                    version = int(row[0]) if row else 0
                    if version > SCHEMA_VERSION:
                        raise StatsStoreError(
                            f"{self.path}: written by a newer cuda-llm (schema {version}, this one reads up to "
                            f"{SCHEMA_VERSION}); upgrade cuda-llm or pass another path (--db or ${DB_ENV})")
                elif tables - {"sqlite_sequence"}:
                    raise StatsStoreError(f"{self.path}: an SQLite file of something else (tables {sorted(tables)}); "
                                          f"pass another path (--db or ${DB_ENV})")
                for stmt in filter(str.strip, _SCHEMA.split(";")):
                    conn.execute(stmt)
                if "key" not in {r[1] for r in conn.execute("PRAGMA table_info(events)")}:
                    conn.execute("ALTER TABLE events ADD COLUMN key TEXT")
                conn.execute(_EVENT_KEY)
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        except sqlite3.DatabaseError as exc:
            raise StatsStoreError(f"{self.path}: cannot use the feature statistics ({exc}); "
                                  f"move it away or pass another path (--db or ${DB_ENV})") from None
        finally:
            conn.close()

    # -- writing ------------------------------------------------------------------------------------------
    def record(
        self,
        *,
        arch: str,
        category: str,
        features: Iterable[str],
        compiled: bool,
        passed: bool,
        speedup_over_parent: float | None,
        key: str | None = None,
    ) -> bool:
        """Count one evaluated candidate for each of its features (ids deduplicated); False when ``key``
        was recorded before (nothing counted again).

        ``speedup_over_parent`` is parent time / candidate time (2.0 = twice as fast); it is used only
        when the candidate passed, since a wrong kernel's speed means nothing.
        """
        arch = normalize_arch(arch)
        category = category.strip()
        if not category:
            raise ValueError("category must be the task family, e.g. 'reduction'")
        ids = list(dict.fromkeys(features))
        bad = [f for f in ids if not isinstance(f, str) or not _ID.match(f)]
        if bad:
            raise ValueError(f"feature ids {bad!r} are not catalogue ids (lower-case letters, digits, underscores)")
        if passed and not compiled:
            raise ValueError("passed=True with compiled=False: a candidate that did not compile cannot pass")
        log_s: float | None = None
        if speedup_over_parent is not None and passed:
            s = float(speedup_over_parent)
            if not math.isfinite(s) or s <= 0:
                raise ValueError(f"speedup_over_parent={speedup_over_parent!r}: give parent_ms / candidate_ms (> 0), or None")
            log_s = math.log(s)
        now = time.time()
        with self._write() as conn:
            if key is not None and conn.execute("SELECT 1 FROM events WHERE key = ?", (key,)).fetchone():
                return False
            conn.execute(
                "INSERT INTO events (at, arch, category, features, compiled, passed, speedup, key) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (now, arch, category, ",".join(ids), int(compiled), int(passed),
                 None if log_s is None else float(speedup_over_parent), key),  # type: ignore[arg-type]
            )
            for fid in ids:
                row = conn.execute(
                    "SELECT n_speedups, mean_log_speedup, m2_log_speedup FROM feature_stats "
                    "WHERE feature = ? AND category = ? AND arch = ?", (fid, category, arch)).fetchone()
                n, mean, m2 = row if row else (0, 0.0, 0.0)
                add = 0.0
                if log_s is not None:   # Welford: numerically stable running mean and variance
                    n += 1
                    delta = log_s - mean
                    mean += delta / n
                    m2 += delta * (log_s - mean)
                    add = log_s
                conn.execute(
                    "INSERT INTO feature_stats (feature, category, arch, tries, compiled, passed, n_speedups, "
                    "sum_log_speedup, mean_log_speedup, m2_log_speedup, updated_at) VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (feature, category, arch) DO UPDATE SET tries = tries + 1, "
                    "compiled = compiled + excluded.compiled, passed = passed + excluded.passed, "
                    "n_speedups = excluded.n_speedups, sum_log_speedup = sum_log_speedup + ?, "
                    "mean_log_speedup = excluded.mean_log_speedup, m2_log_speedup = excluded.m2_log_speedup, "
                    "updated_at = excluded.updated_at",
                    (fid, category, arch, int(compiled), int(passed), n, add, mean, m2, now, add),
                )
        return True

    # -- reading ------------------------------------------------------------------------------------------
    _COLS = "feature, category, arch, tries, compiled, passed, n_speedups, sum_log_speedup, mean_log_speedup, m2_log_speedup"

    @staticmethod
    def _row(r: tuple) -> FeatureStats:
        feature, category, arch, tries, compiled, passed, n, s, mean, m2 = r
        return FeatureStats(feature=feature, category=category, arch=arch, tries=tries, compiled=compiled,
                            passed=passed, n_speedups=n, sum_log_speedup=s, mean_log_speedup=mean,
                            var_log_speedup=m2 / (n - 1) if n >= 2 else 0.0)

    def _query(self, sql: str, args: tuple) -> list[tuple]:
        conn = self._connect()
        try:
            return conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StatsStoreError(f"{self.path}: cannot read the feature statistics ({exc})") from None
        finally:
            conn.close()

    def get(self, feature_id: str, category: str, arch: str) -> FeatureStats:
        """The statistics of one cell; all zeros (tries == 0) when nothing was recorded yet."""
        arch = normalize_arch(arch)
        rows = self._query(f"SELECT {self._COLS} FROM feature_stats WHERE feature = ? AND category = ? AND arch = ?",
                           (feature_id, category, arch))
        return self._row(rows[0]) if rows else FeatureStats(feature=feature_id, category=category, arch=arch)

    def all(self, arch: str | None = None, category: str | None = None) -> list[FeatureStats]:
        """Every recorded cell, optionally only one architecture and/or category; sorted by key."""
        where, args = [], []
        if arch is not None:
            where.append("arch = ?")
            args.append(normalize_arch(arch))
        if category is not None:
            where.append("category = ?")
            args.append(category)
        sql = f"SELECT {self._COLS} FROM feature_stats"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY feature, category, arch"
        return [self._row(r) for r in self._query(sql, tuple(args))]

    def n_events(self) -> int:
        """How many candidates were recorded (one event per ``record`` call)."""
        return int(self._query("SELECT COUNT(*) FROM events", ())[0][0])

    def __repr__(self) -> str:
        return f"StatsStore({str(self.path)!r})"


def pooled(stats: Iterable[FeatureStats], feature: str, category: str, arch: str) -> FeatureStats:
    """One feature's evidence summed over every cell (e.g. other categories on the same arch), as one
    FeatureStats; variances are combined exactly (parallel Welford)."""
    n = 0
    mean = m2 = s = 0.0
    tries = compiled = passed = 0
    for st in stats:
        tries += st.tries
        compiled += st.compiled
        passed += st.passed
        s += st.sum_log_speedup
        if st.n_speedups:
            nb = st.n_speedups
            m2b = st.var_log_speedup * (nb - 1)
            delta = st.mean_log_speedup - mean
            tot = n + nb
            mean += delta * nb / tot
            m2 += m2b + delta * delta * n * nb / tot
            n = tot
    return FeatureStats(feature=feature, category=category, arch=arch, tries=tries, compiled=compiled, passed=passed,
                        n_speedups=n, sum_log_speedup=s, mean_log_speedup=mean,
                        var_log_speedup=m2 / (n - 1) if n >= 2 else 0.0)
