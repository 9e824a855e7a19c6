"""Starting and resuming runs: the run directory, the SQLite checkpointer, signals, the final report.

A run is one LangGraph thread whose checkpoints live in ``runs/<id>/checkpoint.sqlite`` (saved
synchronously after every step). A role played by the manual provider interrupts the graph (LangGraph
``interrupt``) when it is asked something: the run ends "waiting" with the pending prompt files listed in
``RunOutcome.waiting``. ``resume_run`` continues it with ``graph.stream(None, config)``; LLM
answers and evaluations are cached in the run directory by prompt and source hash, so even the work of a
step that was killed half-way (kill -9) is not paid for twice. SIGINT/SIGTERM ask the run to stop at the
next step boundary; it stays resumable. A second SIGINT stops at once (still resumable from the last
step).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import threading
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Sequence

from pydantic import BaseModel, Field, model_validator

from cuda_llm.graph.deps import Deps
from cuda_llm.measure.evaluator import CachedEvaluator, Evaluator, MeasureLater, device_missing, require_evaluator
from cuda_llm.runs.dirlock import DirLock
from cuda_llm.runs.llm_cache import CachedChatModel
from cuda_llm.graph.stages import ToolStage
from cuda_llm.graph.stage_plugins import restore_stages, with_plugins
from cuda_llm.graph.stage_list import default_stages
from cuda_llm.graph.state import Limits
from cuda_llm.halts import ENDPOINT_ERRORS, NO_DEVICE, RunHalted, endpoint_halt
from cuda_llm.graph.stop_rules import TIME, TOKENS, hard_stop, reason_text
from cuda_llm.results import baseline_label
from cuda_llm.tools.harness.eval_options import EvalOptions
from cuda_llm.tools.harness.timing_budget import TimingBudget
from cuda_llm.agents.errors import LLMError
from cuda_llm.agents.settings import LLMSettings
from cuda_llm.agents.usage import total_tokens
from cuda_llm.measure.gpu_pool import default_evaluator as measuring
from cuda_llm.runs.rundir import RunDir

ModelFactory = Callable[[str], Any]
RECURSION_LIMIT = 100_000


class RunBusyError(RuntimeError):
    """Another process is running this run right now."""


class _RunLock(DirLock):
    """An exclusive lock on the run directory for the life of one process's session (released on kill)."""

    def __init__(self, root: Path):
        name = Path(root).name
        super().__init__(Path(root) / "run.lock", lambda holder: RunBusyError(
            f"run {name} is being run by {holder}; wait for it to stop (or stop it with Ctrl-C / SIGTERM) "
            "before resuming"))


LEGACY_EVAL_TIME = "eval_time_budget_s"   # RunOptions' timing budget as runs and batches saved it before


class RunOptions(BaseModel):
    """What ``cuda-llm optimize`` controls (budgets become Limits in the state). Saved with the run (config.json)
    and the batch (batch.json); one saved before the timing budget was one model has ``eval_time_budget_s``,
    read as ``timing_budget.time_budget_s``."""

    limits: Limits = Field(default_factory=Limits)
    runs_dir: Path = Path("runs")
    arch: str | None = None
    timing_budget: TimingBudget = Field(default_factory=TimingBudget)   # every candidate's timing on the GPU
    profile: bool = True
    stats_path: Path | None = None     # feature statistics (default: the shared cache's)
    learn: bool = True                 # record feature statistics
    start_from: Path | None = None     # the user's kernel to start from (evaluated first)
    gpus: list[int] | None = None      # the GPU pool's GPUs (indices among the visible ones); None: all. Saved
                                       # with the run: a resumed run measures on them again unless told otherwise
    stages: list[str] = Field(default_factory=list)   # plugin tool stages, 'NAME[:POSITION]' (stages.with_plugins),
                                                      # saved with the run so a resume rebuilds the same graph

    @model_validator(mode="before")
    @classmethod
    def _saved_eval_time(cls, data: Any) -> Any:
        """Options saved before the timing budget was one model: ``eval_time_budget_s`` is its time budget."""
        if isinstance(data, dict) and LEGACY_EVAL_TIME in data:
            data = dict(data)
            seconds = data.pop(LEGACY_EVAL_TIME)
            data.setdefault("timing_budget", {"time_budget_s": seconds})
        return data

    def eval_options(self) -> EvalOptions:
        """How every candidate of the run is judged: the build arch and the timing budget, whole."""
        return EvalOptions(arch=self.arch, budget=self.timing_budget)


class Keep(Enum):
    """``resume_run(gpus=Keep.SAVED)``: measure on the GPUs saved with the run (None would mean all of them)."""

    SAVED = "saved"


GpuChoice = list[int] | None | Keep


def chosen_gpus(saved: list[int] | None, given: GpuChoice) -> list[int] | None:
    """The GPUs a resumed run (or batch) measures on: those given now (``--gpus``), else those it was started
    with."""
    return saved if given is Keep.SAVED else given


def gpus_text(gpus: list[int] | None) -> str:
    """A GPU selection as ``--gpus`` takes it: "0,2" or "all"."""
    return "all" if gpus is None else ",".join(str(g) for g in gpus)


class Extension(BaseModel):
    """More budget for `cuda-llm resume`: each (relative, value) or None. Relative values count from what the run
    has used: +5 rounds = five rounds more than it ran, +2h = two hours more than it spent."""

    rounds: tuple[bool, int] | None = None
    time_budget_s: tuple[bool, float] | None = None
    token_budget: tuple[bool, int] | None = None

    def apply(self, limits: Limits, *, rounds_done: int, elapsed_s: float, tokens_used: int) -> Limits:
        upd: dict[str, Any] = {}
        if self.rounds:
            rel, v = self.rounds
            upd["max_rounds"] = rounds_done + v if rel else v
        if self.time_budget_s:
            rel, v = self.time_budget_s
            upd["time_budget_s"] = elapsed_s + v if rel else v
        if self.token_budget:
            rel, v = self.token_budget
            upd["token_budget"] = tokens_used + v if rel else v
        return Limits(**{**limits.model_dump(), **upd})

    def __bool__(self) -> bool:
        return any((self.rounds, self.time_budget_s, self.token_budget))


class RunOutcome(BaseModel):
    run_id: str
    root: Path
    finished: bool
    stop_reason: str | None = None
    stop_text: str = ""                  # the stop reason in words, with the run's numbers
    interrupted: bool = False
    error: str | None = None
    halt: str | None = None              # a stop rule that needs a person (halts.HALTS)
    halt_text: str = ""                  # what happened and what to do
    waiting: list[dict[str, str]] = Field(default_factory=list)   # manual roles: {name, role, prompt, answer}
    best: dict[str, Any] = Field(default_factory=dict)
    final: dict[str, Any] = Field(default_factory=dict)
    baseline: dict[str, Any] = Field(default_factory=dict)
    rounds: int = 0
    tokens: dict[str, dict] = Field(default_factory=dict)
    elapsed_s: float = 0.0
    evaluations: int = 0
    report_path: Path | None = None
    table: str = ""


def _load_task(task: Any) -> Any:
    # local: `cuda-llm --help` loads this module; the task loader pulls NumPy
    from cuda_llm.tasks import load_task

    return task if hasattr(task, "task") and hasattr(task, "reference") else load_task(str(task))


def _task_ref(loaded: Any) -> str:
    # local: `cuda-llm --help` loads this module; the task loader pulls NumPy
    from cuda_llm.tasks.loader import SUITE_DIR

    folder = Path(loaded.task.folder).resolve()
    return loaded.task.name if folder.parent == SUITE_DIR.resolve() else str(folder)


def _task_in_runs(loaded: Any, runs_dir: Path) -> str | None:
    """The task folder relative to the runs folder when it lies inside it (module files imported with the runs,
    $CUDA_LLM_IMPORTED): a runs folder moved to another machine or path still finds its tasks."""
    try:
        return Path(loaded.task.folder).resolve().relative_to(Path(runs_dir).resolve()).as_posix()
    except (ValueError, AttributeError):
        return None


def _saved_task(config: dict[str, Any], runs_dir: Path) -> Any:
    """The task a run was started on: its saved folder, else (moved) the same folder inside the runs folder."""
    ref = config["task"]
    inside = config.get("task_in_runs")
    if inside and not Path(str(ref)).exists() and (Path(runs_dir) / inside).is_dir():
        ref = str(Path(runs_dir) / inside)
    return _load_task(ref)


def start_run(task: Any, settings: Any, options: RunOptions | None = None, *, evaluator: Evaluator | None = None,
              model_factory: ModelFactory | None = None, stages: Sequence[ToolStage] | None = None,
              progress: Any = None, handle_signals: bool = True,
              on_created: Callable[[str], None] | None = None, stop: threading.Event | None = None) -> RunOutcome:
    """A new run of ``task`` (a suite name, a folder, or a LoadedTask). ``settings`` (LLMSettings) are
    needed unless ``model_factory(role)`` gives the chat models (None for a role played by rules).
    ``on_created(run_id)`` is called as soon as the run directory exists (a batch records it); setting ``stop``
    stops the run at the next step boundary, as SIGINT does (a batch stops its runs with one event)."""
    options = options or RunOptions()
    if settings is None and model_factory is None:
        raise ValueError("start_run needs LLM settings (see cuda_llm.agents.settings.load_settings) or a model_factory")
    loaded = _load_task(task)
    if stages is None and options.stages:
        stages = with_plugins(options.stages)      # a missing plugin refuses before the run folder exists
    rundir = RunDir.create(Path(options.runs_dir), loaded.task.name)
    config = {
        "task": _task_ref(loaded),
        "task_in_runs": _task_in_runs(loaded, Path(options.runs_dir)),
        "stages": [s.name for s in (stages if stages is not None else default_stages())],
        "limits": options.limits.model_dump(),
        "options": options.model_dump(mode="json", exclude={"limits"}),
        "llm": settings.redacted() if settings is not None else {},
    }
    rundir.save_config(config)
    if on_created is not None:
        on_created(rundir.run_id)
    initial = {"run_id": rundir.run_id, "task": loaded.task.name, "limits": options.limits.model_dump()}
    if options.start_from is not None:
        rundir.write_candidate("seed", Path(options.start_from).read_text())
        initial["seed"] = True
    return _drive(rundir, loaded, settings, options, initial, evaluator=evaluator, model_factory=model_factory,
                  stages=stages, progress=progress, handle_signals=handle_signals, stop=stop)


def resume_run(run_id: str, runs_dir: Path | str = "runs", *, settings: Any = None, evaluator: Evaluator | None = None,
               model_factory: ModelFactory | None = None, stages: Sequence[ToolStage] | None = None,
               progress: Any = None, handle_signals: bool = True, extend: Extension | None = None,
               gpus: GpuChoice = Keep.SAVED, stop: threading.Event | None = None,
               max_rounds: int | None = None) -> RunOutcome:
    """Continue a run from its last checkpoint (its saved task, budgets, models and GPUs). ``extend`` gives a
    finished run more rounds, time or tokens and continues it with a new round. ``gpus``: the GPU pool's GPUs
    from now on (None: all), saved with the run in place of the old choice; by default the saved ones.
    ``max_rounds``: an unfinished run ends after this round at the latest (its final check and report run as
    at any stop rule): the night is over, the results are wanted now."""
    rundir = RunDir.open(run_id, Path(runs_dir))
    config = rundir.load_config()
    options = saved_options(config, runs_dir)
    saved = options.gpus
    options.gpus = chosen_gpus(saved, gpus)
    stages = restore_stages(config.get("stages"), options.stages, stages, rundir.run_id)
    loaded = _saved_task(config, Path(runs_dir))
    if settings is None and model_factory is None:
        settings = settings_from_config(config.get("llm") or {})
    return _drive(rundir, loaded, settings, options, None, evaluator=evaluator, model_factory=model_factory,
                  stages=stages, progress=progress, handle_signals=handle_signals, extend=extend, stop=stop,
                  gpus_before=saved, max_rounds=max_rounds)


def saved_options(config: dict[str, Any], runs_dir: Path | str) -> RunOptions:
    """The RunOptions a run was started with (its config.json), in ``runs_dir``. A run saved before its GPUs
    were kept has none, which means all of them, as it did then."""
    fields = {k: v for k, v in (config.get("options") or {}).items()
              if (k in RunOptions.model_fields or k == LEGACY_EVAL_TIME) and k != "limits"}
    return RunOptions(**{**fields, "limits": Limits(**config.get("limits", {})), "runs_dir": Path(runs_dir)})


def settings_from_config(llm: dict[str, Any], *, api_key: str | None = None,
                         overrides: dict[str, dict[str, Any]] | None = None) -> Any:
    """The run's saved settings, each role with its own (provider, model, endpoint, temperature, budgets),
    with API keys from ``api_key`` or the environment (never saved); ``overrides`` change what was saved."""
    return LLMSettings.from_saved(llm, api_key=api_key, overrides=overrides)


class _Signals:
    """SIGINT/SIGTERM -> stop at the next step boundary; a second SIGINT -> KeyboardInterrupt."""

    def __init__(self, flag: threading.Event, run_id: str, enabled: bool):
        self.flag, self.run_id = flag, run_id
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.old: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        if self.flag.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.flag.set()
        print(f"\n{signal.Signals(signum).name}: stopping after the current step; continue later with "
              f"`cuda-llm resume {self.run_id}`", file=sys.stderr, flush=True)

    def __enter__(self) -> "_Signals":
        if self.enabled:
            for s in (signal.SIGINT, signal.SIGTERM):
                self.old[s] = signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        for s, h in self.old.items():
            signal.signal(s, h)


class _EndpointGuard:
    """Counts each role's LLM calls that failed at the endpoint in a row (this session) and halts the run at
    the limit: a planner's or coder's failure already stops the run, but the critic falls back to rules, so
    without this a dead critic endpoint would be paid for (timeouts, retries) round after round."""

    def __init__(self, tracer: Any, limit: int, run_id: str):
        self.tracer, self.limit, self.run_id = tracer, limit, run_id
        self.streak: dict[str, int] = {}
        self._lock = threading.Lock()

    def ok(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.streak[str(event.get("role"))] = 0
        self.tracer.event("llm_call", **event)

    def failed(self, info: dict[str, Any], exc: BaseException) -> None:
        # local: `cuda-llm --help` loads this module; agents.structured pulls LangChain
        from cuda_llm.agents.structured import _is_api_error

        if not _is_api_error(exc):
            return
        role = str(info.get("role"))
        with self._lock:
            streak = self.streak[role] = self.streak.get(role, 0) + 1
        self.tracer.event("llm_error", **info, error=f"{type(exc).__name__}: {exc}"[:500], streak=streak)
        if endpoint_halt(streak, self.limit):
            raise RunHalted(ENDPOINT_ERRORS, f"the last {streak} {role} calls failed at the endpoint "
                            f"({type(exc).__name__}: {str(exc)[:200]})",
                            f"check the endpoint with `cuda-llm doctor`, then `cuda-llm resume {self.run_id}`") from exc


def spends_nothing(settings: Any, model_factory: ModelFactory | None) -> bool:
    """No role calls an LLM endpoint (each is answered by hand or by the rules): going on without a GPU until
    the next measurement costs nothing."""
    return model_factory is None and settings is not None and not settings.endpoint_roles()


def _make_models(rundir: Any, settings: Any, factory: ModelFactory | None, tracer: Any,
                 limits: Limits | None = None) -> dict[str, Any]:
    """role -> the cached chat model that plays it (None: the role is played by rules)."""
    # local: `cuda-llm --help` loads this module; the role models pull LangChain's clients
    from cuda_llm.graph.roles import role_models

    cache = Path(rundir.root) / "cache" / "llm"
    guard = _EndpointGuard(tracer, (limits or Limits()).max_endpoint_errors, rundir.run_id)
    raw = role_models(settings, rundir, factory)
    return {role: None if m is None else CachedChatModel(m, role, cache, on_call=guard.ok, on_error=guard.failed,
                                                         rundir=rundir)
            for role, m in raw.items()}


def default_evaluator(options: RunOptions) -> Evaluator:
    """What measures a run when none is given: a pool over the GPUs of ``options.gpus`` (all by default; closed
    with the evaluator); on a machine without a CUDA device the plain evaluator, which the run halts on before
    spending anything."""
    return measuring(options.gpus, options=options.eval_options(), profile=options.profile)


def _stats(options: RunOptions) -> Any:
    if not options.learn:
        return None
    # local: `cuda-llm --help` loads this module; the feature database is needed only in a run
    from cuda_llm.feature_db.stats import StatsStore

    return StatsStore(options.stats_path)


def _drive(rundir: Any, loaded: Any, settings: Any, options: RunOptions, initial: dict | None, *,
           evaluator: Evaluator | None, model_factory: ModelFactory | None, stages: Sequence[ToolStage] | None,
           progress: Any, handle_signals: bool, extend: Extension | None = None,
           stop: threading.Event | None = None, gpus_before: list[int] | None = None,
           max_rounds: int | None = None) -> RunOutcome:
    # local: `cuda-llm --help` loads this module; the checkpointer pulls LangGraph
    from langgraph.checkpoint.sqlite import SqliteSaver

    # local: `cuda-llm --help` loads this module; the feature database is needed only in a run
    from cuda_llm.feature_db.catalogue import load_catalogue
    # local: `cuda-llm --help` loads this module; the graph build pulls LangGraph
    from cuda_llm.graph.build import compile_graph
    # local: `cuda-llm --help` loads this module; the trace module pulls rich
    from cuda_llm.runs.trace import open_trace

    with _RunLock(rundir.root):
        return _drive_locked(rundir, loaded, settings, options, initial, evaluator=evaluator,
                             model_factory=model_factory, stages=stages, progress=progress,
                             handle_signals=handle_signals, open_trace=open_trace, load_catalogue=load_catalogue,
                             compile_graph=compile_graph, SqliteSaver=SqliteSaver, extend=extend, stop=stop,
                             gpus_before=gpus_before, max_rounds=max_rounds)


def _drive_locked(rundir: Any, loaded: Any, settings: Any, options: RunOptions, initial: dict | None, *,
                  evaluator: Evaluator | None, model_factory: ModelFactory | None, stages: Sequence[ToolStage] | None,
                  progress: Any, handle_signals: bool, open_trace: Any, load_catalogue: Any, compile_graph: Any,
                  SqliteSaver: Any, extend: Extension | None = None, stop: threading.Event | None = None,
                  gpus_before: list[int] | None = None, max_rounds: int | None = None) -> RunOutcome:
    if evaluator is not None:
        require_evaluator(evaluator)   # refused whole, before the trace opens
    tracer = open_trace(rundir.trace_path)
    otel = _live_otel(rundir, tracer)
    owned = evaluator is None          # made here: closed here (a default pool's workers)
    if evaluator is None:
        evaluator = default_evaluator(options)
    if initial is None and device_missing(evaluator) and spends_nothing(settings, model_factory):
        evaluator = MeasureLater(evaluator, rundir.run_id)   # answered turns go on; the next measurement halts
        tracer.event("decision", kind="measure_later", text="no CUDA device here: the run's roles spend nothing, "
                     "so it goes on through their turns and stops, resumable, at its next measurement")
    evaluator.bind_trace(tracer.event)     # a pool client: each job's GPU and times go to this run's trace
    conn = sqlite3.connect(str(rundir.checkpoint_path), check_same_thread=False)
    try:
        # local: `cuda-llm --help` loads this module; the checkpoint serializer pulls LangGraph
        from cuda_llm.runs.serde import CompressedSerializer

        saver = SqliteSaver(conn, serde=CompressedSerializer())
        deps = Deps(loaded=loaded, rundir=rundir, tracer=tracer,
                    evaluator=CachedEvaluator(evaluator, Path(rundir.root) / "cache"),
                    models=_make_models(rundir, settings, model_factory, tracer, options.limits), stats=_stats(options),
                    catalogue=load_catalogue(), progress=progress, settings=settings)
        if stop is not None:
            deps.stop_requested = stop
        if deps.evaluator.parallelism > 1:   # refining coders measure side by side too, one per GPU
            deps.gpu_lock = threading.BoundedSemaphore(deps.evaluator.parallelism)
        graph = compile_graph(deps, saver, stages)
        config = {"configurable": {"thread_id": rundir.run_id}, "recursion_limit": RECURSION_LIMIT}
        snap = graph.get_state(config)
        if initial is None:
            if not snap.values:
                raise RuntimeError(f"run {rundir.run_id} has no checkpoint yet: start it again with `cuda-llm optimize`")
            deps.elapsed_at_start = float(snap.values.get("elapsed_s") or 0.0)
            if extend:
                snap = _extend(graph, config, snap, extend, rundir, tracer)
            elif max_rounds is not None and snap.next:
                snap = _cap_rounds(graph, config, snap, max_rounds, rundir, tracer)
            if options.gpus != gpus_before:
                _change_gpus(rundir, tracer, gpus_before, options.gpus)
            tracer.event("run_resume", run_id=rundir.run_id, next=list(snap.next), elapsed_s=deps.elapsed_at_start,
                         gpus=evaluator.gpu_labels, gpus_chosen=gpus_text(options.gpus))
        else:
            tracer.event("run_start", run_id=rundir.run_id, task=loaded.task.name, limits=options.limits.model_dump(),
                         arch=deps.arch, device=getattr(deps.device, "name", None), gpus=evaluator.gpu_labels,
                         gpus_chosen=gpus_text(options.gpus))
            initial["device"] = getattr(deps.device, "name", None)
        if progress is not None and hasattr(progress, "on_event"):
            tracer.add_listener(progress.on_event)

        deps.progress_call("start", rundir.run_id, loaded.task.name, resumed=initial is None,
                           limits=(snap.values.get("limits") if initial is None else None) or options.limits.model_dump(),
                           elapsed_s=deps.elapsed_at_start, tokens=total_tokens(snap.values.get("tokens")))
        if initial is None and (snap.values.get("baseline") or {}).get("ms") is not None:
            deps.progress_call("baseline", snap.values["baseline"]["ms"], baseline_label(snap.values["baseline"]))
        error = None
        halted: RunHalted | None = None
        with _Signals(deps.stop_requested, rundir.run_id, handle_signals):
            try:
                if device_missing(evaluator):
                    raise RunHalted(NO_DEVICE, "there is no CUDA device on this machine to measure candidates on",
                                    f"run `cuda-llm resume {rundir.run_id}` on a machine with an NVIDIA GPU "
                                    "(`cuda-llm doctor` checks one); nothing was spent")
                for _ in graph.stream(initial, config, stream_mode="values", durability="sync"):
                    if deps.stop_requested.is_set():
                        break
            except KeyboardInterrupt:
                deps.stop_requested.set()
            except RunHalted as exc:   # a stop rule that needs a person: unfinished and resumable
                halted = exc
                tracer.event("decision", kind="halt", reason=exc.reason, text=exc.what, advice=exc.advice)
            except Exception as exc:  # an endpoint that is down, a full disk: resumable from the last step

                if not isinstance(exc, LLMError):
                    tracer.event("error", error=f"{type(exc).__name__}: {exc}"[:1000])
                    raise
                error = str(exc)
                tracer.event("error", error=error[:1000])
        snap = graph.get_state(config)
        values = dict(snap.values)
        finished = bool(values) and not snap.next   # no checkpoint yet (halted before setup): not finished
        waiting = _waiting(snap)
        if waiting:
            tracer.event("waiting", prompts=[w["name"] for w in waiting])
        out = RunOutcome(run_id=rundir.run_id, root=Path(rundir.root), finished=finished,
                         stop_reason=values.get("stop_reason"),
                         stop_text=reason_text(values.get("stop_reason"), Limits(**(values.get("limits") or {}))),
                         interrupted=deps.stop_requested.is_set() and not finished,
                         error=error, halt=halted.reason if halted else None,
                         halt_text=f"{halted.what}. What to do: {halted.advice}" if halted else "",
                         waiting=waiting, best=values.get("best") or {}, final=values.get("final") or {},
                         baseline=values.get("baseline") or {}, rounds=int(values.get("round") or 0),
                         tokens=values.get("tokens") or {}, elapsed_s=float(values.get("elapsed_s") or 0.0),
                         evaluations=int(values.get("evaluations") or 0))
        if values:   # a stopped run gets its report too: the rounds so far
            out = _report(rundir, values, out)
        tracer.event("run_end", finished=finished, interrupted=out.interrupted, stop_reason=out.stop_reason,
                     error=error, halt=out.halt, halt_text=out.halt_text, waiting=len(waiting), best=out.best.get("id"),
                     best_ms=out.best.get("ms"))
        deps.progress_call("finish", out)
        return out
    finally:
        conn.close()
        if owned:
            evaluator.close()
        close = getattr(tracer, "close", None)
        if callable(close):
            close()
        if otel is not None:
            otel.stop()


def _live_otel(rundir: Any, tracer: Any) -> Any:
    """The run's spans sent as it goes, when $CUDA_LLM_OTEL_ENDPOINT (or --otel) names a backend; a set-up
    problem is a warning in the trace, never the run's end."""
    if not os.environ.get("CUDA_LLM_OTEL_ENDPOINT", "").strip():
        return None
    try:
        # local: the exporter (the OpenTelemetry SDK, an extra) is loaded only when asked for
        from cuda_llm.runs.otel_export import live_export_from_env

        return live_export_from_env(rundir.root, rundir.run_id)
    except Exception as exc:  # noqa: BLE001 - tracing is secondary to the run
        tracer.event("warning", where="otel", error=f"{type(exc).__name__}: {exc}"[:300])
        return None


def _cap_rounds(graph: Any, config: dict, snap: Any, max_rounds: int, rundir: Any, tracer: Any) -> Any:
    """An unfinished run's rounds capped: it ends after round ``max_rounds`` (or the round it is in, when it is
    past it) through the stop rules, so its final check and report run as at any stop."""
    old = Limits(**(snap.values.get("limits") or {}))
    cap = max(int(max_rounds), int(snap.values.get("round") or 0), 1)
    if cap >= old.max_rounds:
        return snap
    new = old.model_copy(update={"max_rounds": cap})
    graph.update_state(config, {"limits": new.model_dump()})
    tracer.event("decision", kind="cap_rounds", before=old.model_dump(), after=new.model_dump())
    rundir.save_config({**rundir.load_config(), "limits": new.model_dump()})
    return graph.get_state(config)


class NotExtendable(RuntimeError):
    """More budget was asked for a run that has not finished (it still has budget: resume it as it is)."""


def _extend(graph: Any, config: dict, snap: Any, extend: Extension, rundir: Any, tracer: Any) -> Any:
    """A finished run with more budget: new limits, the stop reason cleared, the next step a new round."""
    values = snap.values
    if snap.next:
        raise NotExtendable(f"run {rundir.run_id} has not finished, so it still has budget: resume it without "
                            "--rounds/--time-budget/--token-budget")
    old = Limits(**(values.get("limits") or {}))
    new = extend.apply(old, rounds_done=int(values.get("round") or 0), elapsed_s=float(values.get("elapsed_s") or 0.0),
                       tokens_used=total_tokens(values.get("tokens")))

    spent = hard_stop(elapsed_s=float(values.get("elapsed_s") or 0.0), tokens=total_tokens(values.get("tokens")),
                      budget=new)
    if spent is not None:   # another round would start with a budget already spent, and stop after it
        flag = {TIME: "--time-budget +2h", TOKENS: "--token-budget +1M"}[spent]
        raise NotExtendable(f"run {rundir.run_id} has spent its {'wall-clock' if spent == TIME else 'token'} budget "
                            f"(the {new.reserve_s:g}s reserve for the final check included); give more, e.g. {flag}")
    graph.update_state(config, {"limits": new.model_dump(), "stop_reason": None, "round_done": True,
                                "plateau_count": 0, "plateau_ref_ms": (values.get("best") or {}).get("ms")},
                       as_node="critique")
    tracer.event("decision", kind="extend", before=old.model_dump(), after=new.model_dump())
    cfg = rundir.load_config()
    rundir.save_config({**cfg, "limits": new.model_dump()})
    return graph.get_state(config)


def _change_gpus(rundir: Any, tracer: Any, before: list[int] | None, after: list[int] | None, **why: Any) -> None:
    """``--gpus`` on resume: the new choice is saved with the run (later resumes keep it) and traced (``why``:
    more fields for the event, e.g. the batch whose resume changed it)."""
    cfg = rundir.load_config()
    rundir.save_config({**cfg, "options": {**(cfg.get("options") or {}), "gpus": after}})
    tracer.event("decision", kind="gpus", before=gpus_text(before), after=gpus_text(after), **why)


def save_run_gpus(run_id: str, runs_dir: Path | str, gpus: list[int] | None, **why: Any) -> bool:
    """Make ``gpus`` the GPU choice saved with a run that is not running, as ``--gpus`` on its resume would (a
    batch resumed with ``--gpus`` moves its task runs with it, so that `cuda-llm resume RUN` measures there
    too). False when it already was. Raises RunBusyError while another process drives the run."""
    # local: `cuda-llm --help` loads this module; the trace module pulls rich
    from cuda_llm.runs.trace import open_trace

    rundir = RunDir.open(run_id, Path(runs_dir))
    with _RunLock(rundir.root):
        before = saved_options(rundir.load_config(), runs_dir).gpus
        if before == gpus:
            return False
        tracer = open_trace(rundir.trace_path)
        try:
            _change_gpus(rundir, tracer, before, gpus, **why)
        finally:
            tracer.close()
    return True


def _waiting(snap: Any) -> list[dict[str, str]]:
    """The prompts the run waits on: the values of the graph's pending interrupts (manual roles)."""
    out = []
    for it in getattr(snap, "interrupts", None) or ():
        v = getattr(it, "value", None)
        if isinstance(v, dict) and v.get("name"):
            out.append({k: str(v.get(k, "")) for k in ("name", "role", "prompt", "answer")})
    return sorted(out, key=lambda w: w["name"])


def _report(rundir: Any, values: dict, out: RunOutcome) -> RunOutcome:
    """The Markdown report and the console table (best effort: the run itself is already safe)."""
    try:
        # local: `cuda-llm --help` loads this module; the report writers are needed only at a run's end
        from cuda_llm.report.summary import build_summary
        from cuda_llm.report.markdown import final_table, write_report

        summary = build_summary(rundir, values)
        out.report_path = Path(write_report(rundir, summary))
        out.table = final_table(summary)
    except Exception as exc:  # noqa: BLE001
        out.table = f"(report not written: {type(exc).__name__}: {exc})"
    return out
