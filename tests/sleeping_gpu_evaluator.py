"""A test double for one GPU of the pool: FakeGpuEvaluator's invented measurements, each taking ``sleep_s``
of wall-clock time (``busy``: of this process's CPU time) and logged with the "GPU" that ran it.

Every measurement appends two JSON lines to ``span_log`` (shared by every GPU, every process: the pool's
threads, a batch's processes, Ray actors): ``{"phase": "start", ...}`` before the sleep and ``{"phase": "end",
...}`` after, with the GPU's label, the candidate, the kind of job and wall-clock times, so a test can check
that no two measurements overlapped on one GPU and that N GPUs measured N at once.

Worker failures, for the re-queue paths: a candidate named in ``fail_once`` makes the first worker that
measures it fail (an exception, or with ``die=True`` the worker's process exits, as a lost Ray actor does);
a marker file in ``marker_dir`` makes it once across processes. A candidate in ``fail_always`` fails on every
worker. Timings: ``timings`` by variant as in FakeGpuEvaluator, else ``ms_of(variant)``, else ``default_ms``.
Without ``compile`` (the default) nothing calls nvcc, ``build`` included: every source "builds".
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

from fake_gpu_evaluator import FakeGpuEvaluator, variant_of

from cuda_llm.results import Status


class WorkerCrashed(RuntimeError):
    """What the double raises for a worker failure (not a kernel failure: the judge turns those into results)."""


class SleepingGpuEvaluator(FakeGpuEvaluator):
    """One "GPU" named ``gpu`` (see the module docstring)."""

    def __init__(self, gpu: str, timings: dict[str, Any] | None = None, *, sleep_s: float = 0.2,
                 span_log: Path | None = None, marker_dir: Path | None = None, fail_once: tuple[str, ...] = (),
                 fail_always: tuple[str, ...] = (), die: bool = False, sleep_of: Callable[[str], float] | None = None,
                 default_ms: float | None = 1.0, ms_of: Callable[[str], float] | None = None, compile: bool = False,
                 busy: bool = False, **kw: Any):
        super().__init__(dict(timings or {}), compile=compile, **kw)
        self.gpu = gpu
        self.sleep_s = sleep_s
        self.sleep_of = sleep_of
        self.span_log = Path(span_log) if span_log else None
        self.marker_dir = Path(marker_dir) if marker_dir else None
        self.fail_once = set(fail_once)
        self.fail_always = set(fail_always)
        self.die = die
        self.default_ms = default_ms
        self.ms_of = ms_of
        self.busy = busy

    def _span(self, phase: str, kind: str, candidate: str, task: str = "", **extra: Any) -> None:
        if self.span_log is None:
            return
        line = json.dumps({"phase": phase, "gpu": self.gpu, "kind": kind, "candidate": candidate, "task": task,
                           "t": time.time(), "pid": os.getpid(), **extra})
        with open(self.span_log, "a") as f:
            f.write(line + "\n")

    def _should_fail(self, candidate: str) -> bool:
        if candidate in self.fail_always:
            return True
        if candidate not in self.fail_once:
            return False
        if self.marker_dir is None:
            self.fail_once.discard(candidate)
            return True
        marker = self.marker_dir / f"failed-{candidate}"
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        os.close(fd)
        return True

    def _measure(self, loaded: Any, source: str, candidate: str, kind: str, table: dict[str, Any]) -> Any:
        task = loaded.task.name
        self._span("start", kind, candidate, task)
        if self._should_fail(candidate):
            self._span("lost", kind, candidate, task)
            if self.die:
                os._exit(17)
            raise WorkerCrashed(f"worker on GPU {self.gpu} failed while measuring {candidate}")
        wait = self.sleep_of(candidate) if self.sleep_of else self.sleep_s
        if self.busy:                         # the judge's CPU work: spin on this process's CPU instead of sleeping
            until = time.process_time() + wait
            while time.process_time() < until:
                pass
        else:
            time.sleep(wait)
        variant = variant_of(source) or ("baseline" if candidate.split("-")[0] == "baseline" else None)
        if variant is not None and variant not in self.timings and variant not in table:
            ms = self.ms_of(variant) if self.ms_of is not None else self.default_ms
            if ms is not None:
                table = {**table, variant: ms}
        res = super()._measure(loaded, source, candidate, kind, table)
        self._span("end", kind, candidate, task, status=res.status.value)
        return res

    def build(self, loaded: Any, source: str, candidate_id: str) -> Any:
        """No nvcc unless ``compile``: every source builds (the coders' compile checks pass at once)."""
        if self.compile:
            return super().build(loaded, source, candidate_id)
        from cuda_llm.results import CompileResult, EvalResult
        from cuda_llm.tools.compiler.compile import source_hash

        return EvalResult(task=loaded.task.name, candidate=candidate_id, source_hash=source_hash(source), status=Status.ok,
                          compile=CompileResult(ok=True, arch=self.arch, source_hash=source_hash(source)))

    def profile(self, loaded: Any, source: str, candidate_id: str, work_dir: Path, result: Any) -> Any:
        self._span("start", "profile", candidate_id, loaded.task.name)
        time.sleep(self.sleep_s / 2)
        self._span("end", "profile", candidate_id, loaded.task.name, status=Status.ok.value)
        return super().profile(loaded, source, candidate_id, work_dir, result)


class SleepingFactory:
    """Builds a SleepingGpuEvaluator where a slot runs its jobs (a Ray actor, a slot's own process), named
    ``gpu``, or by default for the GPU Ray gave it (its CUDA_VISIBLE_DEVICES). Picklable."""

    def __init__(self, work: Path, gpu: str | None = None, **kw: Any):
        self.work, self.gpu, self.kw = str(work), gpu, kw

    def __call__(self) -> SleepingGpuEvaluator:
        gpu = self.gpu or os.environ.get("CUDA_VISIBLE_DEVICES", "?")
        return SleepingGpuEvaluator(gpu, {"baseline": 10.0}, span_log=Path(self.work) / "spans.jsonl",
                                    marker_dir=Path(self.work), **self.kw)


def read_spans(path: Path) -> list[dict[str, Any]]:
    """The log's lines (a line torn by a kill is skipped)."""
    out = []
    if not Path(path).is_file():
        return out
    for line in Path(path).read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def intervals(spans: list[dict[str, Any]]) -> list[tuple[str, str, str, float, float]]:
    """(gpu, kind, candidate, start, end) of every measurement that finished (started and ended on one GPU)."""
    open_: dict[tuple[str, str, str, int], float] = {}
    out = []
    for s in spans:
        key = (s["gpu"], s["kind"], s["candidate"], s["pid"])
        if s["phase"] == "start":
            open_[key] = s["t"]
        elif s["phase"] == "end" and key in open_:
            out.append((s["gpu"], s["kind"], s["candidate"], open_.pop(key), s["t"]))
        elif s["phase"] == "lost":
            open_.pop(key, None)
    return out


def overlaps_per_gpu(ivs: list[tuple[str, str, str, float, float]]) -> list[tuple[Any, Any]]:
    """Pairs of measurements that overlapped in time on one GPU (none is the pool's promise)."""
    bad = []
    by_gpu: dict[str, list] = {}
    for iv in ivs:
        by_gpu.setdefault(iv[0], []).append(iv)
    for items in by_gpu.values():
        items.sort(key=lambda x: x[3])
        for a, b in zip(items, items[1:]):
            if b[3] < a[4]:
                bad.append((a, b))
    return bad


def max_concurrency(ivs: list[tuple[str, str, str, float, float]]) -> int:
    """The most measurements running at one moment, over every GPU."""
    edges = sorted([(iv[3], 1) for iv in ivs] + [(iv[4], -1) for iv in ivs], key=lambda e: (e[0], e[1]))
    now = best = 0
    for _, d in edges:
        now += d
        best = max(best, now)
    return best
