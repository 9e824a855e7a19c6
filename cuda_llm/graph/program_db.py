"""The program database: every passing candidate of a run, kept with what was measured about it.

The loop's search draws each round's parents from here (parents.py): the best, the elites of other
feature-set niches, and stepping stones. It lives in the run directory as its own SQLite file
(``programs.sqlite``), not in the checkpointed state, which only names the file: the checkpoint stays
small however many rounds a run has. Writes are upserts keyed by candidate id, so a step replayed after
a kill (kill -9 included) writes the same rows again and the archive ends as in a run never stopped.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from pydantic import BaseModel, Field

ARCHIVE_FILE = "programs.sqlite"
NO_FEATURES = "(none)"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS programs (
    id TEXT PRIMARY KEY,
    round INTEGER NOT NULL,
    ms REAL NOT NULL,
    data TEXT NOT NULL
);
"""


class Program(BaseModel):
    """One passing candidate: its source (by hash), its features, its timing and its profile summary."""

    id: str
    round: int
    hash: str
    parent: str = ""
    features: list[str] = Field(default_factory=list)   # what the planner asked for
    detected: list[str] = Field(default_factory=list)   # what the detectors find in its source
    ms: float
    lo: float | None = None
    hi: float | None = None
    pct_sol: float | None = None
    profile: str = ""
    bottleneck: str = ""
    tuned: str = ""

    @property
    def niche(self) -> str:
        """Its MAP-Elites cell: the set of catalogue features found in its source."""
        return "+".join(sorted(set(self.detected))) or NO_FEATURES


class ProgramDB:
    """The archive of one run (one SQLite file; a connection per call, so any thread may use it)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as conn, conn:
            conn.executescript(_SCHEMA)

    @classmethod
    def of_run(cls, root: Path | str, rel: str = ARCHIVE_FILE) -> "ProgramDB":
        return cls(Path(root) / rel)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), timeout=60)
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    def add(self, programs: list[Program] | Program) -> None:
        """Insert or replace (by id), all in one transaction."""
        items = [programs] if isinstance(programs, Program) else list(programs)
        if not items:
            return
        with closing(self._connect()) as conn, conn:
            conn.executemany("INSERT OR REPLACE INTO programs (id, round, ms, data) VALUES (?, ?, ?, ?)",
                             [(p.id, p.round, p.ms, p.model_dump_json()) for p in items])

    def all(self, *, before_round: int | None = None) -> list[Program]:
        """Every program (of rounds before ``before_round``), fastest first, ties by id."""
        sql = "SELECT data FROM programs"
        args: tuple = ()
        if before_round is not None:
            sql += " WHERE round < ?"
            args = (before_round,)
        with closing(self._connect()) as conn:
            rows = conn.execute(sql + " ORDER BY ms, id", args).fetchall()
        return [Program.model_validate(json.loads(r[0])) for r in rows]

    def get(self, pid: str) -> Program | None:
        with closing(self._connect()) as conn:
            row = conn.execute("SELECT data FROM programs WHERE id = ?", (pid,)).fetchone()
        return Program.model_validate(json.loads(row[0])) if row else None

    def __len__(self) -> int:
        with closing(self._connect()) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM programs").fetchone()[0])
