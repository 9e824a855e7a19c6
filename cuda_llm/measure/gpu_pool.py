"""The GPU worker pool: one evaluation worker per GPU, so a round's candidates are measured side by side.

A *slot* is one GPU's worker: on this machine an Evaluator pinned to that GPU (``GpuEvaluator(gpu=i)``, whose
workers get ``CUDA_VISIBLE_DEVICES`` set to that device and hold that device's lock file), run in a process of
its own when the pool has two GPUs or more (measure/process_slots.py: two judges never share one interpreter) and
in this process with one; on a cluster a Ray actor that owns one GPU (measure/ray_slots.py). The pool has one thread per slot that takes jobs from one
queue, so a slot runs one job at a time: never two timed evaluations (or a profile and an evaluation) on one
GPU, and a job waits for whichever GPU frees first (profiles included). The runs that share a pool (a batch)
send their jobs to the same queue, first come first served.

A job whose slot fails (the slot raised: a lost Ray actor or node, a harness fault, never a bad kernel, which
the judge turns into a result) is put back at the head of the queue for another slot, once; a second loss
halts the run (``EvaluationLost``), resumable. A slot that fails twice in a row is retired; when none is left
every waiting job halts its run. A result is delivered once, from the one attempt that finished, so nothing
is lost or counted twice.

Runs talk to the pool through a ``PoolClient`` (the Evaluator seam): it compiles in the caller's thread first
(on the CPU, many at a time) so the GPU is not held while nvcc runs, then queues the measurement and waits.
Every job is recorded in the run's trace as a ``gpu_job`` event: which GPU ran it, from when to when (wall
clock), so overlaps can be checked after the fact.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Collection, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cuda_llm.measure.evaluator import Analysis, Evaluator, EventFn, GpuEvaluator, JOB_KINDS, ToolsMixin, run_job
from cuda_llm.halts import WORKERS_LOST, RunHalted
from cuda_llm.results import DeviceInfo, EvalResult, HeadToHead
from cuda_llm.tools.harness.eval_options import EvalOptions
from cuda_llm.tools.device import device_probe

MAX_REQUEUES = 1          # a job whose worker was lost goes back to the queue this many times
RETIRE_AFTER = 2          # a slot that failed this many jobs in a row takes no more
SLOT_PROCESSES: bool | None = None   # local_pool's default: None, a process per GPU when there are two or more


class EvaluationLost(RunHalted):
    """The workers a job was sent to were lost (twice), or no worker is left: the run halts, resumable."""

    def __init__(self, what: str, advice: str = "check the GPUs (`nvidia-smi`, `cuda-llm doctor`) or the Ray "
                 "cluster (`ray status`), then resume the run: finished evaluations are kept"):
        super().__init__(WORKERS_LOST, what, advice)


class Slot(Protocol):
    """One GPU's worker. ``run`` blocks until the job is done; it raises only when the worker itself failed."""

    label: str          # which GPU, as the trace records it: "0", "1" (CUDA_VISIBLE_DEVICES' names), "node:gpu"

    def run(self, kind: str, args: tuple[Any, ...]) -> Any: ...

    def close(self) -> None: ...


class BuildTools(Protocol):
    """What a pool does on this machine rather than on a GPU: builds, analyses and the toolchain."""

    def build(self, loaded: Any, source: str, candidate_id: str) -> EvalResult: ...

    def analyze(self, loaded: Any, result: EvalResult, profile: Any,
                allowed_features: Collection[str] | None = None) -> Analysis: ...

    def toolchain(self) -> dict[str, str]: ...


class EvaluatorSlot:
    """A GPU of this machine, its Evaluator in this process (its ``evaluate``, ``profile``... run in the slot's
    thread; the candidate runs in the evaluator's own child process). measure/process_slots.py has the slot whose
    evaluator runs in a process of its own."""

    def __init__(self, evaluator: Evaluator, label: str):
        self.evaluator = evaluator
        self.label = label

    def run(self, kind: str, args: tuple[Any, ...]) -> Any:
        return run_job(self.evaluator, kind, args)

    def close(self) -> None:
        self.evaluator.close()


@dataclass
class _Job:
    kind: str
    args: tuple[Any, ...]
    candidate: str
    on_event: EventFn | None
    submitted: float = field(default_factory=time.time)
    future: Future = field(default_factory=Future)
    attempts: int = 0
    lost_on: list[str] = field(default_factory=list)


class GpuPool:
    """Slots and the queue that feeds them (see the module docstring)."""

    def __init__(self, slots: Sequence[Slot], *, arch: str, device: DeviceInfo | None, tools: BuildTools | None = None,
                 prebuild: bool = False, max_requeues: int = MAX_REQUEUES, retire_after: int = RETIRE_AFTER,
                 needs_local_device: bool = False):
        if not slots:
            raise ValueError("a GPU pool needs at least one GPU")
        self.arch = arch
        self.device = device
        # build / analyze / toolchain (compiles stay on this machine): by default the first local GPU's evaluator
        if tools is None and isinstance(slots[0], EvaluatorSlot):
            tools = slots[0].evaluator
        self.tools = tools
        self.prebuild = prebuild
        self.max_requeues = max_requeues
        self.retire_after = retire_after
        self.needs_local_device = needs_local_device
        self.slots = list(slots)
        self.labels = [s.label for s in self.slots]
        self._queue: deque[_Job] = deque()
        self._cond = threading.Condition()
        self._live: set[str] = set(self.labels)
        self._closed = False
        self.jobs_done = 0
        self._threads = [threading.Thread(target=self._serve, args=(s,), name=f"gpu-pool-{s.label}", daemon=True)
                         for s in self.slots]
        for t in self._threads:
            t.start()

    # ------------------------------------------------------------------------------------ the queue
    @property
    def parallelism(self) -> int:
        """How many jobs run at once: the slots still alive."""
        with self._cond:
            return max(1, len(self._live))

    @property
    def live(self) -> list[str]:
        with self._cond:
            return [lb for lb in self.labels if lb in self._live]

    def submit(self, kind: str, args: tuple[Any, ...], *, candidate: str = "", on_event: EventFn | None = None) -> Future:
        if kind not in JOB_KINDS:
            raise ValueError(f"unknown job kind {kind!r}; one of {', '.join(JOB_KINDS)}")
        job = _Job(kind, tuple(args), candidate, on_event)
        with self._cond:
            if self._closed:
                raise RuntimeError("the GPU pool is closed")
            if not self._live:
                job.future.set_exception(EvaluationLost(f"no GPU worker of the pool is left for {candidate or kind}"))
                return job.future
            self._queue.append(job)
            self._cond.notify_all()
        return job.future

    def run(self, kind: str, *args: Any, candidate: str = "", on_event: EventFn | None = None) -> Any:
        """Queue a job and wait for its result (raises EvaluationLost when its workers were lost)."""
        return self.submit(kind, args, candidate=candidate, on_event=on_event).result()

    def client(self, on_event: EventFn | None = None, *, owns_pool: bool = False) -> "PoolClient":
        """The Evaluator one run uses; ``on_event`` (or the run's trace, bound later) records its jobs;
        ``owns_pool``: closing the client closes the pool."""
        return PoolClient(self, on_event, owns_pool=owns_pool)

    def close(self) -> None:
        """Finish the jobs queued, stop the slot threads, close the slots."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for t in self._threads:
            t.join()
        for s in self.slots:
            try:
                s.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass

    def __enter__(self) -> "GpuPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------------------- the slot loop
    def _take(self, label: str) -> _Job | None:
        """The first queued job this slot may run (not one it was lost on while another slot lives)."""
        with self._cond:
            while True:
                if label not in self._live:
                    return None
                others = len(self._live) > 1
                for i, job in enumerate(self._queue):
                    if not (others and label in job.lost_on):
                        del self._queue[i]
                        return job
                if self._closed and not self._queue:
                    return None
                self._cond.wait(timeout=1.0)

    def _serve(self, slot: Slot) -> None:
        failures = 0
        while True:
            job = self._take(slot.label)
            if job is None:
                return
            start = time.time()
            try:
                value = slot.run(job.kind, job.args)
            except BaseException as exc:  # noqa: BLE001 - the worker failed, not the kernel: re-queue
                failures += 1
                self._lost(slot, job, exc, start, retire=failures >= self.retire_after)
                if failures >= self.retire_after:
                    return
                continue
            failures = 0
            value = stamped(value, slot.label)
            end = time.time()
            self._emit(job, status="done", gpu=slot.label, start=start, end=end)
            with self._cond:
                self.jobs_done += 1
            job.future.set_result(value)

    def _lost(self, slot: Slot, job: _Job, exc: BaseException, start: float, *, retire: bool) -> None:
        error = f"{type(exc).__name__}: {exc}"[:500]
        job.lost_on.append(slot.label)
        requeue = job.attempts < self.max_requeues
        self._emit(job, status="lost", gpu=slot.label, start=start, end=time.time(), error=error, requeued=requeue,
                   retired=retire)
        job.attempts += 1
        orphans: list[_Job] = []
        with self._cond:
            if requeue:
                self._queue.appendleft(job)
            if retire:
                self._live.discard(slot.label)
                if not self._live:
                    orphans, self._queue = list(self._queue), deque()
            self._cond.notify_all()
        if not requeue:
            job.future.set_exception(EvaluationLost(
                f"{job.kind} of {job.candidate or job.kind} lost its worker {job.attempts} times "
                f"(on {', '.join(job.lost_on)}; last: {error})"))
        for o in orphans:
            o.future.set_exception(EvaluationLost(f"every GPU worker of the pool failed (last: {error}); "
                                                  f"{o.kind} of {o.candidate or o.kind} was not run"))

    @staticmethod
    def _emit(job: _Job, **fields: Any) -> None:
        if job.on_event is None:
            return
        try:
            job.on_event("gpu_job", kind=job.kind, candidate=job.candidate, attempt=job.attempts + 1,
                         queued_s=round(max(0.0, fields["start"] - job.submitted), 3),
                         seconds=round(fields["end"] - fields["start"], 3), **fields)
        except Exception:  # noqa: BLE001 - a closed trace never loses a measurement
            pass


def stamped(value: Any, label: str) -> Any:
    """A job's results marked with the GPU that measured them (EvalResult.gpu), so that a run can tell timings
    from two GPUs apart before it compares them (graph/selection.py)."""
    if isinstance(value, EvalResult):
        return value if value.gpu is not None else value.model_copy(update={"gpu": label})
    if isinstance(value, tuple):
        return tuple(stamped(v, label) for v in value)
    return value


class PoolClient(ToolsMixin):
    """One run's Evaluator on a shared pool: every measurement is a job; builds, analyses and the toolchain are
    the pool's tools (this machine's nvcc)."""

    def __init__(self, pool: GpuPool, on_event: EventFn | None = None, *, owns_pool: bool = False):
        self.pool = pool
        self.owns_pool = owns_pool
        self.arch = pool.arch
        self.device = pool.device
        self._on_event = on_event
        self.needs_local_device = pool.needs_local_device

    def close(self) -> None:
        """Close the pool if this client owns it (a run's default pool); a shared pool is its owner's to close."""
        if self.owns_pool:
            self.pool.close()

    def bind_trace(self, on_event: EventFn) -> None:
        """Record this client's jobs in a run's trace (graph/run.py binds it once the trace is open)."""
        self._on_event = on_event

    @property
    def parallelism(self) -> int:
        return self.pool.parallelism

    @property
    def gpu_labels(self) -> list[str] | None:
        return list(self.pool.labels)

    def _run(self, kind: str, *args: Any, candidate: str) -> Any:
        return self.pool.run(kind, *args, candidate=candidate, on_event=self._on_event)

    # -- measurements: jobs on the pool
    def evaluate(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> EvalResult:
        # nvcc on the CPU now, in this thread, while the GPUs time others: the GPU's worker finds the build cached
        # (with one GPU there is nothing to overlap with, so it would only add a cache look-up)
        if self.pool.prebuild and self.pool.parallelism > 1:
            try:
                self.build(loaded, source, candidate_id)
            except Exception:  # noqa: BLE001 - the evaluation itself says what is wrong with the source
                pass
        return self._run("evaluate", loaded, source, candidate_id, work_dir, candidate=candidate_id)

    def baseline(self, loaded: Any) -> EvalResult:
        return self._run("baseline", loaded, candidate="baseline")

    def library(self, loaded: Any) -> EvalResult | None:
        return self._run("library", loaded, candidate="library")

    def profile(self, loaded: Any, source: str, candidate_id: str, work_dir: Path, result: EvalResult) -> Any:
        return self._run("profile", loaded, source, candidate_id, work_dir, result, candidate=candidate_id)

    def final_check(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> tuple[EvalResult, EvalResult]:
        return self._run("final_check", loaded, source, candidate_id, work_dir, candidate=candidate_id)

    def head_to_head(self, loaded: Any, challenger: str, champion: str, challenger_id: str, champion_id: str,
                     work_dir: Path) -> HeadToHead:
        """One job: every leg on the GPU that takes it, nothing else on that GPU in between."""
        return self._run("head_to_head", loaded, challenger, champion, challenger_id, champion_id, work_dir,
                         candidate=challenger_id)

    # -- on this machine: the pool's tools, or the tools' own (ToolsMixin) for a pool without
    def build(self, loaded: Any, source: str, candidate_id: str) -> EvalResult:
        if self.pool.tools is not None:
            return self.pool.tools.build(loaded, source, candidate_id)
        return super().build(loaded, source, candidate_id)

    def analyze(self, loaded: Any, result: EvalResult, profile: Any,
                allowed_features: Collection[str] | None = None) -> Analysis:
        if self.pool.tools is not None:
            return self.pool.tools.analyze(loaded, result, profile, allowed_features)
        return super().analyze(loaded, result, profile, allowed_features)

    def toolchain(self) -> dict[str, str]:
        return self.pool.tools.toolchain() if self.pool.tools is not None else super().toolchain()


# ------------------------------------------------------------------------------------------ set-up
def parse_gpus(text: str | None) -> list[int] | None:
    """'0,1,3' -> [0, 1, 3]; 'all' or None -> None (every visible GPU). Indices count the GPUs this process
    sees (after CUDA_VISIBLE_DEVICES), as ``EvalOptions.gpu`` does."""
    if text is None or str(text).strip().lower() in ("", "all"):
        return None
    out: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part.isdigit():
            raise ValueError(f"--gpus {text!r}: {part!r} is not a GPU index; write e.g. 0,1,2,3 or all")
        if int(part) in out:
            raise ValueError(f"--gpus {text!r}: GPU {part} is named twice")
        out.append(int(part))
    if not out:
        raise ValueError(f"--gpus {text!r} names no GPU; write e.g. 0,1 or all")
    return out


def check_gpus(gpus: list[int] | None, visible: int, *, what: str = "--gpus") -> list[int]:
    """The GPU indices to use ('all' = every visible one), or a ValueError that says which one is missing
    (``what``: where the choice came from, the flag or a run's saved choice)."""
    if gpus is None:
        return list(range(visible))
    bad = [g for g in gpus if g >= visible]
    if bad:
        seen = f"GPUs 0-{visible - 1}" if visible > 1 else ("GPU 0" if visible == 1 else "no GPU")
        raise ValueError(f"{what}: GPU {bad[0]} is not visible; this process sees {seen}"
                         " (CUDA_VISIBLE_DEVICES applies; `nvidia-smi -L` lists them)")
    return list(gpus)


def same_kind(devices: Sequence[tuple[str, DeviceInfo | None]]) -> None:
    """The GPUs of one pool must be one model: their timings are compared with each other."""
    names = {label: (d.name if d is not None else None) for label, d in devices}
    kinds = set(names.values())
    if len(kinds) > 1:
        listed = ", ".join(f"GPU {lb}: {n}" for lb, n in names.items())
        raise ValueError(f"the pool's GPUs are not all the same model ({listed}); their timings would not compare: "
                         "pick GPUs of one model with --gpus")


def local_pool(gpus: list[int] | None = None, *, options: EvalOptions | None = None, profile: bool = True,
               processes: bool | None = None) -> GpuPool:
    """A pool over this machine's GPUs (``gpus``: indices among the visible ones; None: all of them), one
    GpuEvaluator pinned to each (``options``: the EvalOptions of their measurements, passed whole).

    ``processes``: each GPU's evaluator in a process of its own (measure/process_slots.py), so that the judges
    of two GPUs never wait for one interpreter; None (the default, ``SLOT_PROCESSES``) does so whenever there is
    more than one GPU (tests whose evaluation doubles are patched into this process set ``SLOT_PROCESSES``).
    With one GPU the evaluator runs in this process, one job after another, as a run without a pool did."""
    # local: `cuda-llm --help` loads this module; the slot processes are needed only to measure
    from cuda_llm.tools.harness.runner import pinned_device

    chosen = check_gpus(gpus, device_probe.cuda_device_count())
    if not chosen:
        raise ValueError("there is no CUDA device on this machine for a GPU pool")
    if processes is None:
        processes = SLOT_PROCESSES if SLOT_PROCESSES is not None else len(chosen) > 1
    # this process's own evaluator for the first GPU: builds, analyses and the toolchain (and its device facts)
    first = GpuEvaluator(options=options, profile=profile, gpu=chosen[0])
    options = first.options            # the build arch resolved once, for every slot
    if processes:
        # local: `cuda-llm --help` loads this module; the slot processes are needed only to measure
        from cuda_llm.measure.process_slots import ProcessSlot, start_slots
        from cuda_llm.measure.slot_server import GpuEvaluatorFactory, device_of

        pslots = [ProcessSlot(GpuEvaluatorFactory(options, profile=profile, gpu=g), pinned_device(g)) for g in chosen]
        infos = start_slots(pslots)
        devices = [device_of(i) for i in infos]
        slots: list[Slot] = list(pslots)
    else:
        evaluators = [first] + [GpuEvaluator(options=options, profile=profile, gpu=g) for g in chosen[1:]]
        devices = [ev.device for ev in evaluators]
        slots = [EvaluatorSlot(ev, pinned_device(g)) for ev, g in zip(evaluators, chosen)]
    try:
        same_kind([(s.label, d) for s, d in zip(slots, devices)])
    except ValueError:
        for s in slots:
            s.close()
        raise
    return GpuPool(slots, arch=first.arch, device=first.device, tools=first, prebuild=True, needs_local_device=True)


def default_evaluator(gpus: list[int] | None, *, options: EvalOptions | None, profile: bool) -> Evaluator:
    """What measures a run when none is given: a pool over ``gpus`` of this machine (None: all), which closing the
    evaluator closes; on a machine without a CUDA device the plain GPU evaluator (a run halts on it before
    spending anything: ``device_missing``)."""
    if not device_probe.has_cuda_device():
        return GpuEvaluator(options=options, profile=profile)
    return local_pool(gpus, options=options, profile=profile).client(owns_pool=True)
