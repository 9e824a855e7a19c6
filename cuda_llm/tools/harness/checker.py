"""The verdict on one call of solve(), given the raw data the worker handed back.

This runs in the parent process, which never loads candidate code: the worker only runs the candidate and
returns the outputs, the inputs as they are after the call and the guard bytes after every buffer. Here
they are compared with the parent's own copies of the inputs and with references the worker never sees.
A candidate that rewrites the worker's Python state therefore cannot change a verdict; at most it can
hand back wrong data, which fails here.

Checks, in order: guard bytes (a store past the end of a buffer), inputs bit for bit (inputs are
read-only), then every output against its reference within the task's tolerance. A failing output that
matches the reference of another input set is reported as a replay (a result kept from an earlier call).
Large checks run in threads (NumPy releases the GIL inside each block).
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from cuda_llm.results import CaseResult
from cuda_llm.tasks.formulas import evaluate as eval_expr
from cuda_llm.tasks.model import Param, Sizes, Task
from cuda_llm.tools.harness import validate
from cuda_llm.tools.harness.worker_protocol import GUARD_BYTE


def tolerance(task: Task, p: Param, sizes: Sizes) -> tuple[float, float]:
    """(atol, rtol) of output ``p`` at ``sizes`` (the task's expressions evaluated)."""
    tol = task.tolerance_for(p)
    return float(eval_expr(tol.atol, sizes)), float(eval_expr(tol.rtol, sizes))


@dataclass
class RawCall:
    """What the worker handed back for one call: outputs, inputs after the call, guard bytes (one row per
    pointer parameter, in parameter order). Missing inputs or guards are not checked."""

    outputs: dict[str, np.ndarray]
    inputs_after: dict[str, np.ndarray] = field(default_factory=dict)
    guards: np.ndarray | None = None


@dataclass
class Expectation:
    """What a call must have produced: the references, and the inputs it was given (for a derived input
    set: the base set's arrays plus the changed chunks, so nothing large is copied)."""

    sizes: Sizes
    expected: dict[str, np.ndarray]
    inputs: dict[str, np.ndarray]
    held_out: bool = False
    chunks: dict[str, Any] = field(default_factory=dict)        # name -> bench_data.Chunks
    rel_slack: float = 0.0                                       # added to rtol (rounded references)
    others: list[tuple[str, dict[str, np.ndarray], float]] = field(default_factory=list)  # (label, refs, slack)
    label: str = ""                                              # e.g. "input set S1", for a replay's reason
    atol_factor: dict[str, float] = field(default_factory=dict)  # per output: atol times this (scaled inputs)


def _first_change(before: np.ndarray, after: np.ndarray, chunks: Any = None) -> list[int] | None:
    """First element of ``after`` that differs from the inputs given (``before`` with ``chunks`` written in)."""
    if after.shape != before.shape and after.size == before.size:
        after = after.reshape(before.shape)
    if after.shape != before.shape or after.dtype != before.dtype:
        return []
    if chunks is None:
        return None if validate.unchanged(before, after) else validate.first_difference(before, after)
    a, b = validate._bits(after), validate._bits(before)
    vals = validate._bits(np.asarray(chunks.values))
    bad: int | None = None
    for k, s in enumerate(chunks.starts):                       # the changed runs hold the new values
        s = int(s)
        run = a[s:s + chunks.length]
        want = vals[k * chunks.length:(k + 1) * chunks.length]
        if not np.array_equal(run, want):
            bad = s + int(np.flatnonzero(run != want)[0])
            break
    starts = np.asarray(chunks.starts, dtype=np.int64)          # everything else holds the base values
    for i in range(0, a.size if bad is None else bad, validate.CHUNK):   # (only before a bad run's element)
        d = np.flatnonzero(a[i:i + validate.CHUNK] != b[i:i + validate.CHUNK])
        if d.size == 0:
            continue
        d = d + i
        run = np.searchsorted(starts, d, side="right") - 1
        ok = (run >= 0) & (d < starts[np.maximum(run, 0)] + chunks.length)
        if not ok.all():
            bad = min(int(d[~ok][0]), bad if bad is not None else a.size)   # the first change of either kind
            break
    if bad is None:
        return None
    return [int(x) for x in np.unravel_index(bad, before.shape)] if before.shape else []


def check_call(task: Task, exp: Expectation, raw: RawCall, *, seconds: float = 0.0,
               pool: ThreadPoolExecutor | None = None, same_as: dict[str, np.ndarray] | None = None) -> CaseResult:
    """The verdict on one call (see the module doc). Never raises for bad data: it fails the case.

    ``same_as``: outputs of another call on the same inputs that passed this very check (same references and
    tolerances), held privately by the caller; an output bit for bit equal to its counterpart there passes
    without the float comparison (a 64M-element output: a bitwise pass instead of a tolerance pass, ~10x
    less CPU). Guards and inputs are checked as always."""
    base = dict(sizes=exp.sizes, held_out=exp.held_out, seconds=seconds)
    pointers = [p for p in task.params if p.kind == "pointer"]
    if raw.guards is not None:
        g = np.asarray(raw.guards, dtype=np.uint8).reshape(len(pointers), -1) if raw.guards.size else raw.guards
        for p, row in zip(pointers, g):
            if not (row == GUARD_BYTE).all():
                n = int(np.prod(exp.expected[p.name].shape if p.name in exp.expected else exp.inputs[p.name].shape,
                                dtype=np.int64))
                return CaseResult(**base, passed=False, output=p.name, kind="overrun",
                                  reason=f"wrote past the end of {p.name} ({n} elements): check the bounds test of every store")
    for p in task.inputs:
        after = raw.inputs_after.get(p.name)
        if after is None:
            continue
        idx = _first_change(exp.inputs[p.name], after, exp.chunks.get(p.name))
        if idx is not None:
            return CaseResult(**base, passed=False, output=p.name, first_bad_index=idx, kind="input_modified",
                              reason=f"input {p.name} was modified (first change at index {idx}); inputs are read-only")
    for p in task.outputs:
        got = raw.outputs.get(p.name)
        if got is None:
            return CaseResult(**base, passed=False, output=p.name, kind="size",
                              reason=f"{p.name}: the worker handed back no output")
        known = (same_as or {}).get(p.name)
        if known is not None and validate.unchanged(known, got):
            continue
        atol, rtol = tolerance(task, p, exp.sizes)
        atol *= exp.atol_factor.get(p.name, 1.0)
        fields = validate.compare_output(p.name, got, exp.expected[p.name], (atol, rtol + exp.rel_slack),
                                         is_float=p.dtype.is_float, pool=pool)
        if not fields["passed"]:
            replay = _replayed(exp, p, got, atol, rtol)
            if replay is not None:
                fields.update(kind="replay", reason=f"{p.name}: the outputs match the reference of {replay}, not of "
                                                    f"the inputs this call was given ({exp.label or 'its own inputs'}): "
                                                    f"a result kept from an earlier call (memoized) is replayed")
            return CaseResult(**base, **fields)
    return CaseResult(**base, passed=True)


def _replayed(exp: Expectation, p: Param, got: np.ndarray, atol: float, rtol: float) -> str | None:
    for label, refs, slack in exp.others:          # a yes or no, stopping at the first block that differs
        if validate.passes(got, refs[p.name], (atol, rtol + slack)):
            return label
    return None


class Checker:
    """Runs checks in threads as the worker's data arrives; ``results`` waits for all of them."""

    def __init__(self, threads: int | None = None):
        n = threads or min(8, os.cpu_count() or 1)
        self._jobs = ThreadPoolExecutor(max_workers=max(1, min(4, n)), thread_name_prefix="check")
        self._blocks = ThreadPoolExecutor(max_workers=max(1, n), thread_name_prefix="check-block")
        self._futures: dict[str, Future] = {}
        self._lock = threading.Lock()
        self.busy_s = 0.0                       # summed over checks (thread time, not wall time)

    def submit(self, key: str, fn: Callable[[ThreadPoolExecutor], CaseResult]) -> Future:
        def run() -> CaseResult:
            t0 = time.perf_counter()
            try:
                return fn(self._blocks)
            finally:
                with self._lock:
                    self.busy_s += time.perf_counter() - t0
        fut = self._jobs.submit(run)
        self._futures[key] = fut
        return fut

    def result(self, key: str) -> CaseResult:
        return self._futures[key].result()

    def done(self, key: str) -> bool:
        return key in self._futures and self._futures[key].done()

    def has(self, key: str) -> bool:
        return key in self._futures

    def close(self) -> None:
        self._jobs.shutdown(wait=True, cancel_futures=True)
        self._blocks.shutdown(wait=True, cancel_futures=True)
