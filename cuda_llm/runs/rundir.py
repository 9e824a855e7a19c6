"""One run's directory: everything large that the graph's state only refers to.

    runs/<run-id>/
      config.json          settings the run was started with (no API keys), read back by resume
      trace.jsonl          structlog JSON events (cuda_llm.runs.trace)
      checkpoint.sqlite    LangGraph checkpoints
      candidates/<id>.cu   every candidate, with <id>.json (its EvalResult) and <id>.compile.log
      prompts/<role>-<label>.md, answers/<role>-<label>.md   every LLM exchange, readable, named by
                           role and candidate (coder-r2c1.md; planner-r2.md; a second call -2.md)
      best.cu, report.md, report.html   written at the end

Every write is atomic (a temporary file renamed into place), so a run killed at any instant leaves
either the old file or the new one, never half of one: resume can trust what it finds.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from pathlib import Path
from typing import Any, Sequence

from pydantic import ValidationError

from cuda_llm.paths import atomic_write
from cuda_llm.results import EvalResult

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_ID_OK = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
RECENT_SHOWN = 5


class RunNotFoundError(FileNotFoundError):
    """No run with that id; the message lists the most recent ones."""

    def __str__(self) -> str:
        return str(self.args[0])


def slug(name: str) -> str:
    """A task name (or folder path) as a file-name-safe piece of a run id."""
    base = Path(str(name).rstrip("/")).name or "task"
    return _SAFE.sub("-", base).strip("-.")[:40] or "task"


def new_run_id(task_name: str) -> str:
    """``YYYYmmdd-HHMMSS-<task>-<4 hex>`` in UTC: sorts by start time, unique without coordination."""
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{slug(task_name)}-{secrets.token_hex(2)}"


def _check_id(kind: str, value: str) -> str:
    if not _ID_OK.match(value or ""):
        raise ValueError(f"{kind} {value!r} is not usable as a file name (letters, digits, '_', '-', '.'; no '/')")
    return value


def exchange_name(role: str, label: str, call: int = 1) -> str:
    """The file stem of one LLM exchange: the role and what it was about (a candidate id such as r2c1, or the
    round r2 for the planner), and the call's number for that pair after the first: coder-r2c1, coder-r2c1-2.
    The one naming rule for prompts/, answers/ and pending prompts."""
    stem = f"{_check_id('role', role)}-{_check_id('label', label)}"
    return stem if call <= 1 else f"{stem}-{call}"


def turn_of(messages: Sequence[Any]) -> int:
    """A call's number in its conversation: 1 + the answers already in it (deterministic, so a resumed
    step names, asks for and finds the same files)."""
    return 1 + sum(getattr(m, "type", None) == "ai" for m in messages)


def _is_run(path: Path) -> bool:
    return path.is_dir() and ((path / "config.json").is_file() or (path / "trace.jsonl").is_file())


def recent_runs(runs_dir: Path, limit: int = RECENT_SHOWN) -> list[str]:
    """Run ids in ``runs_dir``, newest first (by the time stamp their ids start with)."""
    if not runs_dir.is_dir():
        return []
    ids = sorted((p.name for p in runs_dir.iterdir() if _is_run(p)), reverse=True)
    return ids[:limit]


def read_json(path: Path) -> Any:
    """A JSON file's content, or None when it is missing or unreadable (a file torn by a kill): the caller
    then does the work again."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def message_text(content: Any) -> str:
    """A chat message's text, whether its content is a string or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def render_messages(messages: Sequence[Any]) -> str:
    """A conversation as Markdown: one ``## role`` section per message."""
    parts = []
    for m in messages:
        if isinstance(m, dict):
            role, content = str(m.get("role") or m.get("type") or "message"), m.get("content", "")
        else:
            role, content = str(getattr(m, "type", type(m).__name__)), getattr(m, "content", m)
        parts.append(f"## {role}\n\n{message_text(content).rstrip()}\n")
    return "\n".join(parts)


class RunDir:
    """Paths and atomic reads/writes of one run directory. Create with ``create`` or ``open``."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.run_id = self.root.name

    def __repr__(self) -> str:
        return f"RunDir({str(self.root)!r})"

    # -- construction
    @classmethod
    def create(cls, runs_dir: Path, task_name: str, *, run_id: str | None = None) -> "RunDir":
        """A new, empty run directory under ``runs_dir`` (created if needed); ``run_id`` overrides the id."""
        runs_dir = Path(runs_dir)
        try:
            runs_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OSError(f"cannot create the runs directory {runs_dir}: {exc.strerror}; pass --runs-dir DIR") from None
        for _ in range(20):
            rid = _check_id("run id", run_id) if run_id else new_run_id(task_name)
            root = runs_dir / rid
            try:
                root.mkdir()
            except FileExistsError:
                if run_id:
                    raise FileExistsError(f"run {run_id} already exists in {runs_dir}; resume it with "
                                          f"`cuda-llm resume {run_id}` or choose another id") from None
                continue
            for sub in ("candidates", "prompts", "answers"):
                (root / sub).mkdir()
            return cls(root)
        raise FileExistsError(f"could not find a free run id in {runs_dir}")  # pragma: no cover

    @classmethod
    def open(cls, run_id_or_path: str, runs_dir: Path) -> "RunDir":
        """An existing run: a path to its folder, its id in ``runs_dir``, a unique prefix of an id, or "latest".

        Raises RunNotFoundError listing the most recent runs.
        """
        runs_dir = Path(runs_dir)
        given = str(run_id_or_path).strip()
        direct = Path(given).expanduser()
        if given and _is_run(direct):
            return cls(direct.resolve())
        recent = recent_runs(runs_dir, limit=10_000)
        if given == "latest" and recent:
            return cls(runs_dir / recent[0])
        if given and "/" not in given and _is_run(runs_dir / given):
            return cls(runs_dir / given)
        matches = [r for r in recent if r.startswith(given)] if given else []
        if len(matches) == 1:
            return cls(runs_dir / matches[0])
        if len(matches) > 1:
            raise RunNotFoundError(f"{given!r} matches {len(matches)} runs in {runs_dir}: "
                                   f"{', '.join(matches[:RECENT_SHOWN])}; give more of the id")
        if recent:
            listing = "\n".join(f"  {r}" for r in recent[:RECENT_SHOWN])
            hint = f"Recent runs in {runs_dir}:\n{listing}"
        else:
            hint = f"There are no runs in {runs_dir} (wrong --runs-dir?). Start one with `cuda-llm optimize TASK`, or install a recorded one with `cuda-llm demo`."
        raise RunNotFoundError(f"no run {given!r} in {runs_dir}.\n{hint}")

    # -- fixed paths
    @property
    def trace_path(self) -> Path:
        return self.root / "trace.jsonl"

    @property
    def checkpoint_path(self) -> Path:
        return self.root / "checkpoint.sqlite"

    @property
    def config_path(self) -> Path:
        return self.root / "config.json"

    @property
    def best_path(self) -> Path:
        return self.root / "best.cu"

    @property
    def report_path(self) -> Path:
        return self.root / "report.md"

    def candidate_path(self, cid: str) -> Path:
        return self.root / "candidates" / f"{_check_id('candidate id', cid)}.cu"

    def result_path(self, cid: str) -> Path:
        return self.root / "candidates" / f"{_check_id('candidate id', cid)}.json"

    def path(self, rel: str | Path) -> Path:
        """``rel`` inside the run directory (refusing absolute paths and '..')."""
        rel = Path(rel)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise ValueError(f"{str(rel)!r} must be a relative path inside the run directory")
        return self.root / rel

    # -- writes
    def write_text(self, rel: str | Path, text: str) -> Path:
        return atomic_write(self.path(rel), text)

    def write_candidate(self, cid: str, source: str) -> Path:
        return atomic_write(self.candidate_path(cid), source)

    def write_result(self, cid: str, result: EvalResult) -> Path:
        """The result as JSON; the full nvcc output beside it as <id>.compile.log when there is one."""
        if result.compile is not None and result.compile.log:
            atomic_write(self.root / "candidates" / f"{_check_id('candidate id', cid)}.compile.log", result.compile.log)
        return atomic_write(self.result_path(cid), result.model_dump_json(indent=1))

    def read_result(self, cid: str) -> EvalResult | None:
        """The stored result, or None when there is none (or it cannot be read: the caller evaluates again)."""
        p = self.result_path(cid)
        try:
            return EvalResult.model_validate_json(p.read_text())
        except (FileNotFoundError, ValidationError, ValueError, UnicodeDecodeError):
            return None

    def prompt_path(self, name: str) -> Path:
        """prompts/<name>.md, ``name`` from exchange_name."""
        return self.root / "prompts" / f"{_check_id('exchange', name)}.md"

    def answer_path(self, name: str) -> Path:
        """answers/<name>.md, ``name`` from exchange_name."""
        return self.root / "answers" / f"{_check_id('exchange', name)}.md"

    def write_prompt(self, name: str, messages: Sequence[Any]) -> Path:
        return atomic_write(self.prompt_path(name), render_messages(messages))

    def write_answer(self, name: str, text: str) -> Path:
        return atomic_write(self.answer_path(name), text if text.endswith("\n") else text + "\n")

    def exchanges(self, label: str) -> list[tuple[str, Path | None, Path | None]]:
        """Every LLM exchange about ``label`` (a candidate or a round): (name, prompt, answer), in call order."""
        found: dict[str, tuple[Path | None, Path | None]] = {}
        pat = re.compile(rf"^[A-Za-z0-9_]+-{re.escape(label)}(-\d+)?$")
        for folder, i in (("prompts", 0), ("answers", 1)):
            d = self.root / folder
            for f in sorted(d.glob("*.md")) if d.is_dir() else []:
                if pat.match(f.stem):
                    pair = list(found.get(f.stem, (None, None)))
                    pair[i] = f
                    found[f.stem] = (pair[0], pair[1])

        def order(name: str) -> tuple[str, int]:
            role, rest = name.split("-", 1)
            return role, 1 if rest == label else int(rest[len(label) + 1:])

        return [(n, *found[n]) for n in sorted(found, key=order)]

    # -- config
    def save_config(self, config: dict[str, Any]) -> Path:
        return atomic_write(self.config_path, json.dumps(config, indent=1, sort_keys=True, default=_json_default) + "\n")

    def load_config(self) -> dict[str, Any]:
        try:
            data = json.loads(self.config_path.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"{self.config_path} is missing: this run was never fully started; "
                                    "start a new one with `cuda-llm optimize TASK`") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{self.config_path} is not valid JSON ({exc}); fix or restore it to resume") from None
        if not isinstance(data, dict):
            raise ValueError(f"{self.config_path} must hold a JSON object")
        return data


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    return str(obj)
