"""The services the nodes use (not state): task, run directory, tracer, evaluator, models, statistics.

Built by run.py for each session (start or resume) and handed to the node functions by closure, so the
checkpointed state never holds anything but small values.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuda_llm.agents.settings import DEFAULT_PROMPT_BUDGET, LLMSettings
from cuda_llm.measure.evaluator import CachedEvaluator, content_hash
from cuda_llm.paths import atomic_write

if TYPE_CHECKING:
    from cuda_llm.feature_db.model import Feature
    from cuda_llm.feature_db.stats import StatsStore
    from cuda_llm.report.progress import ConsoleProgress
    from cuda_llm.results import DeviceInfo
    from cuda_llm.runs.llm_cache import CachedChatModel
    from cuda_llm.runs.rundir import RunDir
    from cuda_llm.runs.trace import Tracer
    from cuda_llm.tasks.loader import LoadedTask
    from cuda_llm.tasks.model import Task


@dataclass
class Deps:
    loaded: LoadedTask
    rundir: RunDir
    tracer: Tracer
    evaluator: CachedEvaluator
    models: dict[str, CachedChatModel | None]   # role -> its cached chat model; None: the role is played by rules
    stats: StatsStore | None = None             # None: learn nothing
    catalogue: list[Feature] = field(default_factory=list)
    progress: ConsoleProgress | None = None
    stages: list[Any] = field(default_factory=list)   # ToolStage: graph.stages imports this module, not the reverse
    elapsed_at_start: float = 0.0     # active seconds of earlier sessions
    started: float = field(default_factory=time.monotonic)
    stop_requested: threading.Event = field(default_factory=threading.Event)
    precompile: bool = True           # compile in the coder's thread (parallel) so evaluation finds it cached
    no_code_streak: int = 0           # candidates in a row (this session) whose answer held no code
    settings: LLMSettings | None = None   # prompt budgets, the coder's temperatures; None: defaults
    # coders measuring during refinement: one at a time, or one per GPU of the pool (run.py sizes it)
    gpu_lock: threading.Lock | threading.BoundedSemaphore = field(default_factory=threading.Lock)
    _streak_lock: threading.Lock = field(default_factory=threading.Lock)

    def count_code(self, has_code: bool) -> None:
        """One more coder answer: with code it resets the streak, without it adds to it (parallel coders)."""
        with self._streak_lock:
            self.no_code_streak = 0 if has_code else self.no_code_streak + 1

    @property
    def task(self) -> Task:
        return self.loaded.task

    @property
    def arch(self) -> str:
        return self.evaluator.arch

    @property
    def device(self) -> DeviceInfo | None:
        return self.evaluator.device

    def prompt_budget(self, role: str) -> int:
        """The role's prompt size budget in characters (settings, else the role's default)."""
        return self.settings.prompt_budget(role) if self.settings is not None else DEFAULT_PROMPT_BUDGET[role]

    def elapsed(self) -> float:
        return round(self.elapsed_at_start + (time.monotonic() - self.started), 3)

    # sources live by hash under <run>/cache/src/
    def _src_path(self, h: str) -> Path:
        return Path(self.rundir.root) / "cache" / "src" / f"{h}.cu"

    def put_source(self, source: str) -> str:
        h = content_hash(source)
        p = self._src_path(h)
        if not p.is_file():
            atomic_write(p, source)
        return h

    def source(self, h: str) -> str:
        return self._src_path(h).read_text()

    def event(self, name: str, **fields: Any) -> None:
        self.tracer.event(name, **fields)

    def progress_call(self, method: str, *args: Any, **kw: Any) -> None:
        """Console progress is best effort: a missing method or a broken terminal never stops a run."""
        fn = getattr(self.progress, method, None) if self.progress is not None else None
        if fn is None:
            return
        try:
            fn(*args, **kw)
        except Exception:  # noqa: BLE001
            pass
