"""Batch runs: many optimizations as one job (``cuda-llm batch SUITE``), sharing one GPU pool and one budget.

A batch lives in ``<runs>/batches/<batch-id>/``: ``batch.json`` (its state, rewritten atomically after every
change), ``batch.lock`` (held while a process drives it), ``batch.jsonl`` (its own trace) and, at the end,
``table.md`` and ``batch.html``. Each task is optimized by a normal run in ``<runs>/<run-id>/`` (inspectable
with runs, report, show and trace); the batch records the run id the moment the run directory exists, so a
batch killed with SIGKILL resumes every unfinished run from its own checkpoint and starts the tasks not yet
begun, repeating nothing that finished.

Up to ``parallel`` tasks run at once (default: one per GPU of the pool), each in a thread of this process,
all of them sending their measurements to the same pool. The budget is shared as the work goes:

- time: the batch's wall-clock budget minus what it used so far, spread over the tasks not yet started, in
  ``parallel`` lanes: a task starting with R tasks still to start (itself included) gets
  ``left / ceil(R / parallel)``. A task that stops early (plateau, speed of light) leaves its time to the
  later ones; the last ``parallel`` tasks share what is left whole.
- tokens: what the batch has not handed out (the budget, less what finished tasks used and what running tasks
  were given) split evenly over the tasks still to start; what a task does not use returns to the batch.
"""

from __future__ import annotations

import math
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, Field

from cuda_llm.runs.dirlock import DirLock
from cuda_llm.graph.state import Limits
from cuda_llm.agents.usage import total_tokens
from cuda_llm.graph.run import Extension, RunBusyError, gpus_text, resume_run, save_run_gpus, start_run
from cuda_llm.paths import atomic_write
from cuda_llm.runs.rundir import RunNotFoundError

PENDING, RUNNING, FINISHED, STOPPED, WAITING, FAILED, NOT_RUN, REFUSED = (
    "pending", "running", "finished", "stopped", "waiting", "failed", "not run", "refused")
DONE = (FINISHED, FAILED, REFUSED)  # a resumed batch leaves these alone
MIN_TASK_S = 60.0                   # a task is not started with less time than this


class BatchError(ValueError):
    """A suite that cannot be run (a task that does not load, no task at all); nothing was started."""


class BatchBusyError(RuntimeError):
    """Another process is driving this batch now."""


class BatchTask(BaseModel):
    name: str
    ref: str                                  # what load_task takes: a suite name, a folder, a module file
    run_id: str | None = None
    status: str = PENDING
    detail: str = ""
    time_budget_s: float | None = None        # its share, given when it started
    token_budget: int | None = None
    tokens_used: int = 0
    abandoned: list[str] = Field(default_factory=list)   # runs created but killed before their first checkpoint


class BatchState(BaseModel):
    batch_id: str
    suite: str
    created: str
    limits: Limits                            # per task; time and token budgets are the batch's shares
    time_budget_s: float
    token_budget: int
    parallel: int = 1
    elapsed_s: float = 0.0                    # active seconds of earlier sessions
    sessions: int = 0
    finished: bool = False
    gpus: list[str] = Field(default_factory=list)
    gpus_before: list[list[str]] = Field(default_factory=list)   # the GPUs of earlier sessions, where they differed
    ray: str | None = None                    # the Ray cluster's address, when the GPUs are there
    llm: dict[str, Any] = Field(default_factory=dict)           # the LLM settings, redacted (no keys)
    run_options: dict[str, Any] = Field(default_factory=dict)   # RunOptions of every task but its limits (its
                                                                # GPUs included: a resumed batch uses them again)
    tasks: list[BatchTask] = Field(default_factory=list)

    def task(self, name: str) -> BatchTask:
        return next(t for t in self.tasks if t.name == name)


# ------------------------------------------------------------------------------------ the suite
def resolve_suite(spec: str) -> list[tuple[str, str]]:
    """(name, ref) of each task SPEC names (see ``resolve_suite_refusing``); any task that does not load, a
    module file the importer refuses included, stops the batch before it starts."""
    tasks, refused = resolve_suite_refusing(spec, refuse_modules=False)
    return tasks


def resolve_suite_refusing(spec: str, *, refuse_modules: bool = True,
                           import_workers: int | None = None) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    """(name, ref) of each task SPEC names: ``suite`` (the built-in suite), a comma-separated list of task names,
    folders or PyTorch module files, a text file listing them one a line, or a folder of task folders and/or
    PyTorch modules (``*.py``), and (name, ref, reason) of each module file the importer refuses (random,
    needs eval mode, ...): with ``refuse_modules`` those are counted and the batch goes on without them. Every
    task is loaded once here (module files imported with the importer's limits into its cache, several at
    once where the machine has the cores), so any other bad task stops the batch before it starts."""
    # local: `cuda-llm --help` loads this module; the task loader pulls NumPy
    from cuda_llm.tasks import TaskError, load_task
    from cuda_llm.tasks.loader import SUITE_DIR

    refs = _refs(spec, SUITE_DIR)
    if not refs:
        raise BatchError(f"{spec!r} names no task: give `suite`, task names (softmax,gelu), a task folder, a folder "
                         "of task folders or PyTorch modules, or a file listing them")
    modules = [r for r in refs if r.endswith(".py") and Path(r).is_file()]
    if len(modules) > 1:
        _import_ahead(modules, import_workers)
    out: list[tuple[str, str]] = []
    refused: list[tuple[str, str, str]] = []
    bad: list[str] = []
    seen: dict[str, str] = {}
    for ref in refs:
        try:
            loaded = load_task(ref)
        except TaskError as exc:
            reason = _refusal(ref, exc) if refuse_modules else None
            if reason is not None:
                refused.append((_module_task_name(ref), ref, reason))
            else:
                bad.append(f"{ref}: {exc}")
            continue
        except (KeyError, FileNotFoundError, ValueError, ImportError) as exc:
            bad.append(f"{ref}: {exc}")
            continue
        name = loaded.task.name
        if name in seen:
            bad.append(f"{ref}: a second task named {name!r} (also {seen[name]})")
            continue
        seen[name] = ref
        folder = Path(loaded.task.folder).resolve()
        out.append((name, name if folder.parent == SUITE_DIR.resolve() else (ref if ref.endswith(".py") else str(folder))))
    if bad:
        raise BatchError(f"{len(bad)} task(s) of {spec!r} do not load, nothing was started:\n  " + "\n  ".join(bad))
    return out, refused


def _module_task_name(ref: str) -> str:
    # local: `cuda-llm --help` loads this module; the importer pulls NumPy (and PyTorch)
    from cuda_llm.tasks.torch_source import task_name

    return task_name(Path(ref).stem)


def _refusal(ref: str, exc: Exception) -> str | None:
    """The importer's reason when ``ref`` is a module file it refused; None for any other failure (PyTorch
    missing, a bad path): those stop the batch."""
    # local: `cuda-llm --help` loads this module; the importer pulls NumPy (and PyTorch)
    from cuda_llm.tasks.torch_source import INSTALL_HINT

    if not (ref.endswith(".py") and Path(ref).is_file()) or INSTALL_HINT in str(exc):
        return None
    return str(exc).removeprefix(f"{ref}: ").removeprefix(f"{Path(ref)}: ")


def _import_ahead(modules: list[str], workers: int | None) -> None:
    """Import the module files not imported yet in child processes, a few at a time: each takes 5-60 s of
    mostly single-threaded PyTorch, so a folder of them is the batch's longest serial step. Best effort: the
    loop after it imports (or refuses) whatever is still missing, one by one, with the error in hand."""
    import os
    from concurrent.futures import ProcessPoolExecutor
    import multiprocessing

    try:
        # local: `cuda-llm --help` loads this module; the importer pulls NumPy (and PyTorch)
        from cuda_llm.tasks.torch_import import cached_import
    except ImportError:
        return
    todo = []
    for m in modules:
        try:
            folder, refused = cached_import(Path(m))
        except OSError:
            continue
        if folder is None and refused is None:
            todo.append(m)
    n = workers if workers is not None else min(4, max(1, (os.cpu_count() or 1) // 4))
    if len(todo) < 2 or n < 2:
        return
    with ProcessPoolExecutor(max_workers=min(n, len(todo)), mp_context=multiprocessing.get_context("spawn")) as ex:
        list(ex.map(_import_one, todo))


def _import_one(path: str) -> None:
    # local: `cuda-llm --help` loads this module; the importer pulls NumPy (and PyTorch)
    from cuda_llm.tasks.torch_import import import_cached

    try:
        import_cached(Path(path))
    except Exception:  # noqa: BLE001 - the serial pass reports it
        pass


def _refs(spec: str, suite_dir: Path) -> list[str]:
    text = str(spec).strip()
    if text in ("suite", "all", "builtin"):
        return sorted(p.name for p in suite_dir.iterdir() if (p / "task.toml").is_file())
    path = Path(text).expanduser()
    if path.is_dir():
        if (path / "task.toml").is_file():
            return [str(path)]
        subs = [str(p) for p in sorted(path.iterdir()) if p.is_dir() and (p / "task.toml").is_file()]
        mods = [str(p) for p in sorted(path.glob("*.py")) if not p.name.startswith("_")]
        return subs + mods
    if path.is_file() and path.suffix != ".py":
        lines = (ln.split("#", 1)[0].strip() for ln in path.read_text().splitlines())
        base = path.parent
        return [str(base / ln) if (base / ln).exists() else ln for ln in lines if ln]
    return [p.strip() for p in text.split(",") if p.strip()]


# --------------------------------------------------------------------------------- the budget
def time_share(left_s: float, to_start: int, parallel: int) -> float:
    """Seconds for a task that starts now (see the module docstring)."""
    if left_s <= 0:
        return 0.0
    return left_s / max(1, math.ceil(max(1, to_start) / max(1, parallel)))


def token_share(budget: int, state: BatchState, starting: BatchTask) -> int:
    """Tokens for a task that starts now: the batch's unallotted tokens over the tasks still to start."""
    used = sum(t.tokens_used for t in state.tasks if t.status != RUNNING and t is not starting)
    given = sum(t.token_budget or 0 for t in state.tasks if t.status == RUNNING and t is not starting)
    to_start = sum(1 for t in state.tasks if t.status == PENDING) + (0 if starting.status == PENDING else 1)
    return max(0, (budget - used - given) // max(1, to_start))


# --------------------------------------------------------------------------------- the folder
def batches_dir(runs_dir: Path) -> Path:
    return Path(runs_dir) / "batches"


def new_batch_id() -> str:
    import secrets

    return datetime.now().strftime("%Y%m%d-%H%M%S") + "-batch-" + secrets.token_hex(2)


def open_batch(batch_id: str, runs_dir: Path) -> Path:
    """The folder of batch ``batch_id`` (``latest``, a unique prefix, or a path)."""
    root = batches_dir(runs_dir)
    p = Path(batch_id)
    if p.is_dir() and (p / "batch.json").is_file():
        return p
    ids = sorted((d.name for d in root.iterdir() if (d / "batch.json").is_file()), reverse=True) if root.is_dir() else []
    if batch_id == "latest" and ids:
        return root / ids[0]
    hits = [i for i in ids if i.startswith(batch_id)]
    if len(hits) == 1:
        return root / hits[0]
    known = ", ".join(ids[:5]) or "none"
    raise FileNotFoundError(f"no batch {batch_id!r} in {root} ({'ambiguous' if hits else 'known'}: "
                            f"{', '.join(hits) if hits else known})")


def load_state(root: Path) -> BatchState:
    return BatchState.model_validate_json((Path(root) / "batch.json").read_text())


class _Lock(DirLock):
    def __init__(self, root: Path):
        name = Path(root).name
        super().__init__(Path(root) / "batch.lock", lambda holder: BatchBusyError(
            f"batch {name} is being run by {holder}; stop it (Ctrl-C or SIGTERM) before resuming it"))


# --------------------------------------------------------------------------------- the driver
class BatchOutcome(BaseModel):
    batch_id: str
    root: Path
    finished: bool
    interrupted: bool = False
    tasks: list[BatchTask] = Field(default_factory=list)
    elapsed_s: float = 0.0


RunStarter = Callable[..., Any]


class Batch:
    """Drives one batch: starts and resumes its tasks' runs on a shared evaluator pool (see the module doc).

    ``pool``: a GpuPool (measure/gpu_pool.py) or anything with ``client()`` and ``parallelism``; ``settings`` or
    ``model_factory`` as for start_run; ``run_options``: the per-task RunOptions (limits and runs_dir included);
    ``max_rounds``: resumed runs end after this round at the latest (resume_run), tasks not begun start with it;
    ``more_rounds``: every task finished when the batch is resumed continues with that many rounds more (resume_run's
    extension), e.g. a batch ended early by ``max_rounds`` given its night back."""

    def __init__(self, root: Path, state: BatchState, *, pool: Any, run_options: Any, settings: Any = None,
                 model_factory: Any = None, on_event: Callable[[dict[str, Any]], None] | None = None,
                 max_rounds: int | None = None, more_rounds: int | None = None):
        self.root = Path(root)
        self.max_rounds = max_rounds
        self.more_rounds = more_rounds
        self._extend: set[str] = set()      # the tasks given more_rounds in this session
        self.state = state
        self.pool = pool
        self.run_options = run_options
        self.settings = settings
        self.model_factory = model_factory
        self.on_event = on_event
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._taken: set[str] = set()
        self._started = time.monotonic()
        self._trace: Any = None

    # state -------------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return self.state.elapsed_s + (time.monotonic() - self._started)

    def save(self) -> None:
        with self._lock:
            data = self.state.model_copy(update={"elapsed_s": round(self.elapsed(), 3)}).model_dump_json(indent=1)
        atomic_write(self.root / "batch.json", data)

    def event(self, name: str, **fields: Any) -> None:
        """One line of batch.jsonl, also handed to ``on_event`` (the command's progress lines)."""
        if self._trace is not None:
            try:
                self._trace.event(name, **fields)
            except ValueError:
                pass
        if self.on_event is not None:
            try:
                self.on_event({"event": name, **fields})
            except Exception:  # noqa: BLE001 - a display problem never stops a batch
                pass

    # one task ----------------------------------------------------------------------------------
    def _next(self) -> BatchTask | None:
        """The next task for a free lane: one to resume (killed, stopped, waiting) or one to start."""
        with self._lock:
            for t in self.state.tasks:
                if t.name in self._taken or t.status not in (PENDING, RUNNING, STOPPED, WAITING):
                    continue
                self._taken.add(t.name)
                if t.status != PENDING and t.run_id is None:
                    t.status = PENDING
                return t
        return None

    def _allot(self, t: BatchTask) -> tuple[float, int] | None:
        """The task's time and token shares, or None when the batch's time is spent."""
        with self._lock:
            to_start = sum(1 for x in self.state.tasks if x.status == PENDING)
            left = self.state.time_budget_s - self.elapsed()
            secs = time_share(left, to_start, self.state.parallel)
            tokens = token_share(self.state.token_budget, self.state, t)
        if secs < MIN_TASK_S or tokens < 1:
            return None
        return secs, tokens

    def _run_task(self, t: BatchTask) -> None:
        client = self.pool.client()
        common = dict(evaluator=client, model_factory=self.model_factory, handle_signals=False, stop=self.stop)
        out = None
        try:
            if t.run_id is not None:
                self.event("task_resume", task=t.name, run_id=t.run_id)
                with self._lock:
                    t.status = RUNNING
                self.save()
                extend = Extension(rounds=(True, self.more_rounds)) if t.name in self._extend else None
                try:
                    out = resume_run(t.run_id, self.run_options.runs_dir, settings=self.settings,
                                     max_rounds=self.max_rounds, extend=extend, **common)
                except RuntimeError as exc:          # created, killed before its first checkpoint: start anew
                    if "no checkpoint" not in str(exc):
                        raise
                    with self._lock:
                        t.abandoned.append(t.run_id)
                        t.run_id = None
            if out is None:
                shares = self._allot(t)
                if shares is None:
                    with self._lock:
                        t.status, t.detail = NOT_RUN, "the batch's time or token budget was spent before it started"
                    self.event("task_skipped", task=t.name, reason=t.detail)
                    self.save()
                    return
                secs, tokens = shares
                lim = self.run_options.limits
                limits = lim.model_copy(update={"time_budget_s": secs, "token_budget": tokens,
                                                "reserve_s": min(lim.reserve_s, secs / 4)})
                with self._lock:
                    t.status, t.time_budget_s, t.token_budget = RUNNING, secs, tokens
                self.save()

                def created(run_id: str) -> None:
                    with self._lock:
                        t.run_id = run_id
                    self.save()
                    self.event("task_start", task=t.name, run_id=run_id, time_budget_s=secs, token_budget=tokens)

                opts = self.run_options.model_copy(update={"limits": limits})
                out = start_run(t.ref, self.settings, opts, on_created=created, **common)
        except Exception as exc:  # noqa: BLE001 - one task's failure never stops the others
            with self._lock:
                t.status, t.detail = (STOPPED if t.run_id else FAILED), f"{type(exc).__name__}: {exc}"[:500]
            self.event("task_end", task=t.name, run_id=t.run_id, status=t.status, detail=t.detail)
            self.save()
            return
        self._record(t, out)

    def _record(self, t: BatchTask, out: Any) -> None:
        with self._lock:
            t.tokens_used = int(total_tokens(out.tokens))
            if out.finished:
                t.status, t.detail = FINISHED, out.stop_reason or ""
            elif out.waiting:
                t.status, t.detail = WAITING, f"{len(out.waiting)} prompt(s) to answer (cuda-llm answer {out.run_id})"
            elif out.halt:
                t.status, t.detail = STOPPED, f"{out.halt}: {out.halt_text}"
            elif out.error:
                t.status, t.detail = STOPPED, out.error
            else:
                t.status, t.detail = STOPPED, "interrupted"
        self.event("task_end", task=t.name, run_id=t.run_id, status=t.status, detail=t.detail[:300],
                   tokens=t.tokens_used)
        self.save()

    def _carry_gpus(self) -> None:
        """A batch resumed with another ``--gpus``: the choice is saved in batch.json (later resumes keep it) and
        in the config.json of each task run it has begun, traced there as a ``gpus`` decision, so that a run
        resumed on its own (`cuda-llm resume RUN`) measures on them too. A run another process is driving, or
        whose folder is gone, keeps its choice; the batch's own ``gpus`` decision names it with the reason."""
        before = self.state.run_options.get("gpus")     # none saved (an older batch): all, as it measured
        after = getattr(self.run_options, "gpus", None)
        if before == after:
            return
        with self._lock:
            self.state.run_options = {**self.state.run_options, "gpus": after}
        moved: list[str] = []
        kept: dict[str, str] = {}
        for t in self.state.tasks:
            if t.run_id is None:
                continue
            try:
                if save_run_gpus(t.run_id, self.run_options.runs_dir, after, batch=self.state.batch_id):
                    moved.append(t.run_id)
            except (RunBusyError, RunNotFoundError) as exc:
                kept[t.run_id] = str(exc)
        self.event("decision", kind="gpus", before=gpus_text(before), after=gpus_text(after), runs=moved,
                   runs_kept=kept)
        self.save()

    # the batch -----------------------------------------------------------------------------------
    def _lane(self) -> None:
        while not self.stop.is_set():
            t = self._next()
            if t is None:
                return
            self._run_task(t)

    def run(self) -> BatchOutcome:
        # local: `cuda-llm --help` loads this module; the trace module pulls rich
        from cuda_llm.runs.trace import open_trace

        with _Lock(self.root):
            self._trace = open_trace(self.root / "batch.jsonl")
            try:
                self.state.sessions += 1
                self.state.finished = False
                for t in self.state.tasks:
                    if t.status == NOT_RUN:         # a resumed batch (maybe with more budget) tries them again
                        t.status, t.detail = PENDING, ""
                    elif self.more_rounds and t.status == FINISHED and t.run_id is not None:
                        self._extend.add(t.name)
                        t.status, t.detail = STOPPED, f"{self.more_rounds} more round(s) asked (--more-rounds)"
                self.event("batch_start" if self.state.sessions == 1 else "batch_resume", batch_id=self.state.batch_id,
                           tasks=[t.name for t in self.state.tasks], parallel=self.state.parallel,
                           gpus=self.state.gpus, gpus_chosen=gpus_text(getattr(self.run_options, "gpus", None)),
                           elapsed_s=self.state.elapsed_s)
                self._carry_gpus()
                self.save()
                lanes = [threading.Thread(target=self._lane, name=f"batch-lane-{i}", daemon=True)
                         for i in range(max(1, self.state.parallel))]
                for lane in lanes:
                    lane.start()
                try:
                    while any(lane.is_alive() for lane in lanes):
                        for lane in lanes:
                            lane.join(timeout=0.5)
                except KeyboardInterrupt:
                    self.stop.set()
                    for lane in lanes:
                        lane.join()
                done = all(t.status in DONE or t.status == NOT_RUN for t in self.state.tasks)
                self.state.finished = done and not self.stop.is_set()
                self.save()
                self.event("batch_end", finished=self.state.finished, interrupted=self.stop.is_set(),
                           elapsed_s=round(self.elapsed(), 3),
                           statuses={t.name: t.status for t in self.state.tasks})
            finally:
                self._trace.close()
        return BatchOutcome(batch_id=self.state.batch_id, root=self.root, finished=self.state.finished,
                            interrupted=self.stop.is_set(), tasks=list(self.state.tasks), elapsed_s=self.elapsed())


def create_batch(spec: str, runs_dir: Path, limits: Limits, *, time_budget_s: float, token_budget: int, parallel: int,
                 gpus: list[str] | None = None, tasks: list[tuple[str, str]] | None = None,
                 llm: dict[str, Any] | None = None, run_options: dict[str, Any] | None = None,
                 ray_address: str | None = None, refused: list[tuple[str, str, str]] | None = None
                 ) -> tuple[Path, BatchState]:
    """A new batch folder and its state (tasks resolved from ``spec`` unless given; ``refused``: module files
    the importer refused, kept as rows with its reason)."""
    resolved = tasks if tasks is not None else resolve_suite(spec)
    batch_id = new_batch_id()
    root = batches_dir(runs_dir) / batch_id
    root.mkdir(parents=True, exist_ok=False)
    state = BatchState(batch_id=batch_id, suite=str(spec), created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                       limits=limits, time_budget_s=time_budget_s, token_budget=token_budget, parallel=max(1, parallel),
                       gpus=list(gpus or []), ray=ray_address, llm=dict(llm or {}), run_options=dict(run_options or {}),
                       tasks=[BatchTask(name=n, ref=r) for n, r in resolved]
                       + [BatchTask(name=n, ref=r, status=REFUSED, detail=why) for n, r, why in refused or []])
    atomic_write(root / "batch.json", state.model_dump_json(indent=1))
    return root, state

