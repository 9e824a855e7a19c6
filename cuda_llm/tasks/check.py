"""Checking a task folder before any GPU or LLM time goes into it: the reference on the CPU for every shape
(it runs, returns every output with the declared size, finite values, the same answer twice), and whether
the benchmark shape is big enough to fill a GPU. `cuda-llm check-task DIR` adds a compile of naive.cu (tools/, so not here).

Held-out shapes are checked like the others and named in full, with the reference's error: this is for the
task's author, who wrote them in task.toml (what the model sees goes through tools/harness/failure_text.py, which
never names them).
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from cuda_llm.tasks.loader import LoadedTask
from cuda_llm.tasks.model import Sizes
from cuda_llm.tasks.inputs import make_case_inputs, reference_outputs

MIN_BENCH_BYTES = 256e6    # a memory-bound benchmark moves at least this much (an H100 needs ~80 us for it)
MIN_BENCH_FLOPS = 10e9     # a compute-bound one does at least this much work


class ShapeCheck(BaseModel):
    label: str               # "shapes[2] rows=3, cols=17", "held_out[0] rows=5, cols=33", "benchmark ..."
    ok: bool
    problem: str = ""
    seconds: float = 0.0


def _label(kind: str, i: int, sizes: Sizes) -> str:
    where = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return f"benchmark {where}" if kind == "benchmark" else f"{kind}[{i}] {where}"


def _error_text(exc: BaseException, folder: Path) -> str:
    """The exception, and the last line of the task's own code it passed through (a bare KeyError names only
    the key)."""
    text = f"{type(exc).__name__}: {exc}"
    root = str(folder.resolve())
    mine = [f for f in traceback.extract_tb(exc.__traceback__) if str(Path(f.filename).resolve()).startswith(root)]
    if mine:
        f = mine[-1]
        text += f" ({Path(f.filename).name} line {f.lineno}: {(f.line or '').strip()[:80]})"
    return text


def _problems(loaded: LoadedTask, sizes: Sizes, seed: int) -> str:
    """What is wrong with the reference at ``sizes`` ("" when nothing is)."""
    task = loaded.task
    inputs = make_case_inputs(loaded, sizes, np.random.default_rng(seed))
    first = reference_outputs(loaded, inputs, sizes)
    for p in task.outputs:
        arr = first[p.name]
        if arr.dtype.kind not in "fiub":
            return f"output {p.name} has dtype {arr.dtype}; return numbers (float64 where rounding matters)"
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            bad = int((~np.isfinite(arr)).sum())
            return f"output {p.name} has {bad} NaN or Inf value(s); the reference must be finite everywhere"
        if not p.dtype.is_float and arr.dtype.kind == "f" and not np.array_equal(arr, np.round(arr)):
            return f"output {p.name} is declared {p.dtype.value} but the reference returns fractions"
    again = reference_outputs(loaded, inputs, sizes)
    for p in task.outputs:
        if not np.array_equal(first[p.name], again[p.name], equal_nan=True):
            return (f"output {p.name} differs between two calls on the same inputs: the reference must be "
                    "deterministic (no unseeded randomness, no dependence on call order)")
    return ""


def check_reference(loaded: LoadedTask, *, benchmark: bool = True, seed: int = 0) -> list[ShapeCheck]:
    """The reference at every shape (and the benchmark shape unless ``benchmark`` is False)."""
    task = loaded.task
    plan: list[tuple[str, int, Sizes]] = [("shapes", i, s) for i, s in enumerate(task.shapes)]
    plan += [("held_out", i, s) for i, s in enumerate(task.held_out)]
    if benchmark:
        plan.append(("benchmark", 0, task.benchmark))
    out = []
    for kind, i, sizes in plan:
        t0 = time.perf_counter()
        try:
            problem = _problems(loaded, sizes, seed + i)
        except Exception as exc:  # noqa: BLE001 - the user's reference: any error is theirs to see
            problem = _error_text(exc, Path(task.folder))
        out.append(ShapeCheck(label=_label(kind, i, sizes), ok=not problem, problem=problem,
                              seconds=round(time.perf_counter() - t0, 3)))
    return out


def benchmark_size_warning(loaded: LoadedTask) -> str:
    """Why the benchmark shape may be too small to fill a GPU ("" when it is big enough)."""
    task = loaded.task
    b = task.benchmark
    moved, work = task.bytes_at(b), task.flops_at(b)
    if moved >= MIN_BENCH_BYTES or work >= MIN_BENCH_FLOPS:
        return ""
    return (f"the benchmark shape moves {moved / 1e6:.1f} MB and does {work / 1e9:.2f} GFLOP: too little to fill a "
            f"GPU (launch overhead and caches dominate; aim for >= {MIN_BENCH_BYTES / 1e6:.0f} MB or "
            f">= {MIN_BENCH_FLOPS / 1e9:.0f} GFLOP)")


def summarize(checks: list[Any]) -> tuple[int, int]:
    return sum(c.ok for c in checks), len(checks)
