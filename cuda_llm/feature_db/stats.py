"""What every measured candidate taught us about each feature, kept in SQLite across runs and processes.

One row per (feature, task family, GPU architecture, coder model): how often a candidate that really
introduced the feature (detected in its code, absent from its parent: see credit.py) was tried, compiled
and passed; the running mean and variance (Welford) of its reward, the share of the headroom to speed of
light the step closed, split among the step's new features; the same for its log-speedup over the parent
(for display); and how often the planner asked for it and the coder complied. Every ``record`` also
appends one row to an ``events`` log, so the aggregates can be audited or rebuilt. An event may carry a
key (the graph uses run/candidate/source hash): a second record with the same key is ignored, so a step
replayed after a resume never counts a candidate twice.

Pass rates are keyed by the coder's model: what one model can write correctly says little about another.
``all()`` pools the models (one row per feature, family and arch, as the CLI shows it);
``all(by_model=True)`` gives the per-model rows the bandit reads.

Concurrency: several runs (threads or processes) may share one file. WAL mode lets readers go on while
one writer commits; every update is a ``BEGIN IMMEDIATE`` transaction (read-modify-write under the
write lock) and waits up to ``busy_timeout`` for the lock instead of failing. Each call opens its own
connection, so a store object may be used from any thread and survives ``fork``.

Schema 1 files (no model, no reward, no compliance) are migrated in place when opened: their rows keep
their counts and speedups under the model "" (unknown) with no rewards, since their speedups were
credited to every asked feature and cannot be re-split.
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

from cuda_llm.paths import cache_dir
from cuda_llm.feature_db.catalogue import arch_name, parse_arch

DB_ENV = "CUDA_LLM_FEATURE_DB"
DB_FILENAME = "feature_stats.sqlite"
SCHEMA_VERSION = 2
BUSY_TIMEOUT_MS = 60_000
ANY_MODEL = "*"                      # the model of a row pooled over models
_ID = re.compile(r"^[a-z][a-z0-9_]*$")

_STATS_COLUMNS = """
    feature TEXT NOT NULL,
    category TEXT NOT NULL,
    arch TEXT NOT NULL,
    model TEXT NOT NULL DEFAULT '',
    tries INTEGER NOT NULL DEFAULT 0,
    compiled INTEGER NOT NULL DEFAULT 0,
    passed INTEGER NOT NULL DEFAULT 0,
    n_speedups INTEGER NOT NULL DEFAULT 0,
    sum_log_speedup REAL NOT NULL DEFAULT 0,
    mean_log_speedup REAL NOT NULL DEFAULT 0,
    m2_log_speedup REAL NOT NULL DEFAULT 0,
    n_rewards INTEGER NOT NULL DEFAULT 0,
    mean_reward REAL NOT NULL DEFAULT 0,
    m2_reward REAL NOT NULL DEFAULT 0,
    asked INTEGER NOT NULL DEFAULT 0,
    complied INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL,
    PRIMARY KEY (feature, category, arch, model)
"""
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS feature_stats ({_STATS_COLUMNS});
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    arch TEXT NOT NULL,
    category TEXT NOT NULL,
    features TEXT NOT NULL,
    compiled INTEGER NOT NULL,
    passed INTEGER NOT NULL,
    speedup REAL,
    key TEXT,
    model TEXT NOT NULL DEFAULT '',
    reward REAL,
    asked TEXT NOT NULL DEFAULT '',
    complied TEXT NOT NULL DEFAULT ''
);
"""
# Columns added to events since schema 1 (older files get them; their old rows keep the defaults).
_EVENT_COLUMNS = {"key": "TEXT", "model": "TEXT NOT NULL DEFAULT ''", "reward": "REAL",
                  "asked": "TEXT NOT NULL DEFAULT ''", "complied": "TEXT NOT NULL DEFAULT ''"}
_EVENT_KEY = "CREATE UNIQUE INDEX IF NOT EXISTS events_by_key ON events (key)"
# Schema 1's feature_stats columns, copied into schema 2's table by the migration.
_V1_COLUMNS = ("feature, category, arch, tries, compiled, passed, n_speedups, sum_log_speedup, mean_log_speedup, "
               "m2_log_speedup, updated_at")


class StatsStoreError(RuntimeError):
    """The statistics file cannot be used; the message names the file and what to do."""


class FeatureStats(BaseModel):
    """Learned numbers for one feature in one task family on one architecture, for one coder model
    ("" unknown, "*" pooled over models)."""

    feature: str
    category: str
    arch: str
    model: str = ANY_MODEL
    tries: int = 0                 # candidates that introduced the feature (detected, new over the parent)
    compiled: int = 0
    passed: int = 0
    n_speedups: int = 0
    sum_log_speedup: float = 0.0
    mean_log_speedup: float = 0.0
    var_log_speedup: float = 0.0   # sample variance (n - 1); 0 below two speedups
    n_rewards: int = 0             # passing tries with a measured reward
    mean_reward: float = 0.0       # mean share of the headroom to speed of light closed, per credited feature
    var_reward: float = 0.0
    asked: int = 0                 # candidates the planner asked to use it
    complied: int = 0              # ... whose code did use it

    @property
    def mean_speedup(self) -> float | None:
        """Geometric-mean speedup over the parent, None before any was measured."""
        return math.exp(self.mean_log_speedup) if self.n_speedups else None

    @property
    def failures(self) -> int:
        """Tries that did not compile or did not pass the tests."""
        return self.tries - self.passed

    @property
    def compliance(self) -> float | None:
        """How often the coder used the feature when asked to (None before it was asked for)."""
        return self.complied / self.asked if self.asked else None


def default_path() -> Path:
    """$CUDA_LLM_FEATURE_DB, else <cache dir>/feature_stats.sqlite."""
    env = os.environ.get(DB_ENV)
    if env:
        return Path(env).expanduser()
    return cache_dir() / DB_FILENAME


def normalize_arch(arch: str) -> str:
    """'sm_90a', 'compute_90', '9.0' -> 'sm_90', so one GPU's statistics land in one row."""
    return arch_name(parse_arch(arch))


def normalize_model(model: str | None) -> str:
    """The coder model as a key: trimmed, '' when unknown."""
    return (model or "").strip()


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


def _welford(n: int, mean: float, m2: float, x: float) -> tuple[int, float, float]:
    """One more observation in a numerically stable running mean and sum of squared deviations."""
    n += 1
    delta = x - mean
    mean += delta / n
    m2 += delta * (x - mean)
    return n, mean, m2


def _ids(values: Iterable[str], what: str) -> list[str]:
    ids = list(dict.fromkeys(values))
    bad = [f for f in ids if not isinstance(f, str) or not _ID.match(f)]
    if bad:
        raise ValueError(f"{what} {bad!r} are not catalogue ids (lower-case letters, digits, underscores)")
    return ids


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
                if "feature_stats" in tables:
                    self._migrate_stats(conn)
                for stmt in filter(str.strip, _SCHEMA.split(";")):
                    conn.execute(stmt)
                have = {r[1] for r in conn.execute("PRAGMA table_info(events)")}
                for col, decl in _EVENT_COLUMNS.items():
                    if col not in have:
                        conn.execute(f"ALTER TABLE events ADD COLUMN {col} {decl}")
                conn.execute(_EVENT_KEY)
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        except sqlite3.DatabaseError as exc:
            raise StatsStoreError(f"{self.path}: cannot use the feature statistics ({exc}); "
                                  f"move it away or pass another path (--db or ${DB_ENV})") from None
        finally:
            conn.close()

    @staticmethod
    def _migrate_stats(conn: sqlite3.Connection) -> None:
        """Schema 1 -> 2: the stats table gains the model key, rewards and compliance (inside the caller's
        transaction, so a failure leaves the file as it was)."""
        cols = {r[1] for r in conn.execute("PRAGMA table_info(feature_stats)")}
        if "model" in cols:
            return
        conn.execute(f"CREATE TABLE feature_stats_v2 ({_STATS_COLUMNS})")
        conn.execute(f"INSERT INTO feature_stats_v2 ({_V1_COLUMNS}, model) SELECT {_V1_COLUMNS}, '' FROM feature_stats")
        conn.execute("DROP TABLE feature_stats")
        conn.execute("ALTER TABLE feature_stats_v2 RENAME TO feature_stats")

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
        model: str | None = None,
        reward: float | None = None,
        asked: Iterable[str] = (),
        complied: Iterable[str] = (),
    ) -> bool:
        """Count one evaluated candidate; False when ``key`` was recorded before (nothing counted again).

        ``features``: the credited ones (credit.credit_step: in the code, new over the parent); each gets a
        try. ``speedup_over_parent`` (parent time / candidate time) and ``reward`` (the share of headroom
        closed per credited feature) count only when the candidate passed, since a wrong kernel's speed
        means nothing. ``asked`` / ``complied``: what the planner asked for and which of those the code
        uses; counted for compliance only, never as tries.
        """
        arch = normalize_arch(arch)
        category = category.strip()
        if not category:
            raise ValueError("category must be the task family, e.g. 'reduction'")
        ids = _ids(features, "feature ids")
        asked_ids = _ids(asked, "asked feature ids")
        complied_ids = _ids(complied, "complied feature ids")
        if set(complied_ids) - set(asked_ids):
            raise ValueError(f"complied {sorted(set(complied_ids) - set(asked_ids))} were not asked for")
        if passed and not compiled:
            raise ValueError("passed=True with compiled=False: a candidate that did not compile cannot pass")
        log_s: float | None = None
        if speedup_over_parent is not None and passed:
            s = float(speedup_over_parent)
            if not math.isfinite(s) or s <= 0:
                raise ValueError(f"speedup_over_parent={speedup_over_parent!r}: give parent_ms / candidate_ms (> 0), or None")
            log_s = math.log(s)
        r: float | None = None
        if reward is not None and passed:
            r = float(reward)
            if not math.isfinite(r) or not -1.0 <= r <= 1.0:
                raise ValueError(f"reward={reward!r}: give the share of headroom closed per feature, in [-1, 1]")
        model_key = normalize_model(model)
        event = StoredEvent(at=time.time(), arch=arch, category=category, features=ids, compiled=compiled,
                            passed=passed, speedup=None if log_s is None else float(speedup_over_parent),  # type: ignore[arg-type]
                            key=key, model=model_key, reward=r, asked=asked_ids, complied=complied_ids)
        with self._write() as conn:
            if key is not None and conn.execute("SELECT 1 FROM events WHERE key = ?", (key,)).fetchone():
                return False
            _insert_event(conn, event)
            _count(conn, event)
        return True

    # -- reading ------------------------------------------------------------------------------------------
    _COLS = ("feature, category, arch, model, tries, compiled, passed, n_speedups, sum_log_speedup, mean_log_speedup, "
             "m2_log_speedup, n_rewards, mean_reward, m2_reward, asked, complied")

    @staticmethod
    def _row(r: tuple) -> FeatureStats:
        feature, category, arch, model, tries, compiled, passed, n, s, mean, m2, nr, mr, m2r, asked, complied = r
        return FeatureStats(feature=feature, category=category, arch=arch, model=model, tries=tries, compiled=compiled,
                            passed=passed, n_speedups=n, sum_log_speedup=s, mean_log_speedup=mean,
                            var_log_speedup=m2 / (n - 1) if n >= 2 else 0.0, n_rewards=nr, mean_reward=mr,
                            var_reward=m2r / (nr - 1) if nr >= 2 else 0.0, asked=asked, complied=complied)

    def _query(self, sql: str, args: tuple) -> list[tuple]:
        conn = self._connect()
        try:
            return conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StatsStoreError(f"{self.path}: cannot read the feature statistics ({exc})") from None
        finally:
            conn.close()

    def get(self, feature_id: str, category: str, arch: str, model: str | None = None) -> FeatureStats:
        """The statistics of one cell for one coder model, or pooled over the models when ``model`` is None;
        all zeros (tries == 0) when nothing was recorded yet."""
        arch = normalize_arch(arch)
        rows = [r for r in self.all(arch=arch, category=category, by_model=model is not None) if r.feature == feature_id
                and (model is None or r.model == normalize_model(model))]
        return rows[0] if rows else FeatureStats(feature=feature_id, category=category, arch=arch,
                                                 model=ANY_MODEL if model is None else normalize_model(model))

    def all(self, arch: str | None = None, category: str | None = None, *, by_model: bool = False,
            model: str | None = None) -> list[FeatureStats]:
        """Every recorded cell, optionally only one architecture, category and/or coder model; sorted by
        key. Rows of several models are pooled into one (model "*") unless ``by_model`` or ``model``."""
        where, args = [], []
        if arch is not None:
            where.append("arch = ?")
            args.append(normalize_arch(arch))
        if category is not None:
            where.append("category = ?")
            args.append(category)
        if model is not None:
            where.append("model = ?")
            args.append(normalize_model(model))
        sql = f"SELECT {self._COLS} FROM feature_stats"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY feature, category, arch, model"
        rows = [self._row(r) for r in self._query(sql, tuple(args))]
        if by_model or model is not None:
            return rows
        cells: dict[tuple[str, str, str], list[FeatureStats]] = {}
        for r in rows:
            cells.setdefault((r.feature, r.category, r.arch), []).append(r)
        return [pooled(group, *cell) for cell, group in cells.items()]

    def events(self) -> list[StoredEvent]:
        """Every recorded event, oldest first: what the aggregates are rebuilt from."""
        rows = self._query("SELECT id, at, arch, category, features, compiled, passed, speedup, key, model, reward, "
                           "asked, complied FROM events ORDER BY id", ())
        return [StoredEvent(id=i, at=at, arch=arch, category=cat, features=_split(f), compiled=bool(c), passed=bool(p),
                            speedup=sp, key=key, model=model or "", reward=rw, asked=_split(asked), complied=_split(comp))
                for i, at, arch, cat, f, c, p, sp, key, model, rw, asked, comp in rows]

    def rebuild(self, events: Iterable[StoredEvent]) -> int:
        """Replace the event log with ``events`` (in order) and recount every aggregate from it, in one
        transaction: a failure leaves the file as it was. The re-credit migration (recredit.py) calls this
        after detecting again; ``rebuild(events())`` recounts the aggregates as they are. Returns the count."""
        evs = list(events)
        with self._write() as conn:
            conn.execute("DELETE FROM events")
            conn.execute("DELETE FROM feature_stats")
            for ev in evs:
                _insert_event(conn, ev)
                _count(conn, ev)
        return len(evs)

    def n_events(self) -> int:
        """How many candidates were recorded (one event per ``record`` call)."""
        return int(self._query("SELECT COUNT(*) FROM events", ())[0][0])

    def __repr__(self) -> str:
        return f"StatsStore({str(self.path)!r})"


class StoredEvent(BaseModel):
    """One row of the event log: one evaluated candidate as it was credited."""

    id: int | None = None          # kept on a rebuild, so the log's order stays the recording order
    at: float
    arch: str
    category: str
    features: list[str]            # credited: in the code, new over the parent
    compiled: bool
    passed: bool
    speedup: float | None = None   # parent_ms / ms of a passing candidate
    key: str | None = None         # run/candidate/source hash
    model: str = ""
    reward: float | None = None    # share of the headroom closed per credited feature (passing candidates)
    asked: list[str] = []
    complied: list[str] = []


def _split(text: str | None) -> list[str]:
    return [t for t in (text or "").split(",") if t]


def _insert_event(conn: sqlite3.Connection, ev: StoredEvent) -> None:
    conn.execute(
        "INSERT INTO events (id, at, arch, category, features, compiled, passed, speedup, key, model, reward, asked, "
        "complied) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (ev.id, ev.at, ev.arch, ev.category, ",".join(ev.features), int(ev.compiled), int(ev.passed), ev.speedup, ev.key,
         ev.model, ev.reward, ",".join(ev.asked), ",".join(ev.complied)))


def _count(conn: sqlite3.Connection, ev: StoredEvent) -> None:
    """Add one event to the aggregates: a try for every credited feature (its speedup and reward when it
    passed), a request (and compliance) for every asked one."""
    log_s = math.log(ev.speedup) if ev.speedup is not None and ev.passed and ev.speedup > 0 else None
    r = ev.reward if ev.passed else None
    for fid in dict.fromkeys(ev.features + ev.asked):
        row = conn.execute(
            "SELECT tries, compiled, passed, n_speedups, sum_log_speedup, mean_log_speedup, m2_log_speedup, "
            "n_rewards, mean_reward, m2_reward, asked, complied FROM feature_stats "
            "WHERE feature = ? AND category = ? AND arch = ? AND model = ?",
            (fid, ev.category, ev.arch, ev.model)).fetchone()
        tries, comp, pas, n, s_log, mean, m2, nr, mr, m2r, ask, com = row if row else (0,) * 12
        if fid in ev.features:
            tries, comp, pas = tries + 1, comp + int(ev.compiled), pas + int(ev.passed)
            if log_s is not None:
                n, mean, m2 = _welford(n, mean, m2, log_s)
                s_log += log_s
            if r is not None:
                nr, mr, m2r = _welford(nr, mr, m2r, r)
        if fid in ev.asked:
            ask += 1
            com += int(fid in ev.complied)
        conn.execute(
            "INSERT OR REPLACE INTO feature_stats (feature, category, arch, model, tries, compiled, passed, "
            "n_speedups, sum_log_speedup, mean_log_speedup, m2_log_speedup, n_rewards, mean_reward, m2_reward, "
            "asked, complied, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (fid, ev.category, ev.arch, ev.model, tries, comp, pas, n, s_log, mean, m2, nr, mr, m2r, ask, com, ev.at),
        )


def _combine(n: int, mean: float, m2: float, nb: int, mean_b: float, m2b: float) -> tuple[int, float, float]:
    """Two (count, mean, sum of squared deviations) summaries as one: parallel Welford, exact."""
    if not nb:
        return n, mean, m2
    delta = mean_b - mean
    tot = n + nb
    return tot, mean + delta * nb / tot, m2 + m2b + delta * delta * n * nb / tot


def pooled(stats: Iterable[FeatureStats], feature: str, category: str, arch: str, model: str = ANY_MODEL) -> FeatureStats:
    """One feature's evidence summed over several cells (other families, archs or models), as one
    FeatureStats; means and variances are combined exactly."""
    n = nr = 0
    mean = m2 = s = mr = m2r = 0.0
    tries = compiled = passed = asked = complied = 0
    for st in stats:
        tries += st.tries
        compiled += st.compiled
        passed += st.passed
        asked += st.asked
        complied += st.complied
        s += st.sum_log_speedup
        n, mean, m2 = _combine(n, mean, m2, st.n_speedups, st.mean_log_speedup,
                               st.var_log_speedup * max(st.n_speedups - 1, 0))
        nr, mr, m2r = _combine(nr, mr, m2r, st.n_rewards, st.mean_reward, st.var_reward * max(st.n_rewards - 1, 0))
    return FeatureStats(feature=feature, category=category, arch=arch, model=model, tries=tries, compiled=compiled,
                        passed=passed, n_speedups=n, sum_log_speedup=s, mean_log_speedup=mean,
                        var_log_speedup=m2 / (n - 1) if n >= 2 else 0.0, n_rewards=nr, mean_reward=mr,
                        var_reward=m2r / (nr - 1) if nr >= 2 else 0.0, asked=asked, complied=complied)
