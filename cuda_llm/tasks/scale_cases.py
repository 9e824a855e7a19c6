"""The dtype's contract, not the draw's: held-out cases whose inputs are the usual draw scaled to the ends of
the magnitudes each float input declares (task.toml ``magnitude``; a default per dtype). Pure NumPy.

A kernel that is right only for the distribution the task draws from (an fp16 split without scaling, a
softmax that does not subtract the row maximum, a sum kept in fp16) returns NaN, Inf or garbage once the
data is 1e4 or 1e-4 in size; a user's data is. Each scaled case multiplies every scalable input of one
draw by the same power of two, so the scaling is exact in floating point and relations between inputs
(points and their centroids, values and their offsets) hold bit for bit. The check's absolute tolerance is
multiplied by how much each output's largest |value| moved (a GEMM's outputs move by the square of the
factor), so the case asks for the same relative accuracy as the usual draw. Where the float64 reference
would overflow the output's dtype at an end, the factor steps toward 1 until it fits; a case that cannot
fit is dropped (an output that cannot hold the answer is the task's limit, not the kernel's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from cuda_llm.tasks.model import Magnitude, Task

ENDS = ("high", "low")
_DTYPE_MAX = {"float32": float(np.finfo(np.float32).max), "float16": float(np.finfo(np.float16).max)}


@dataclass(frozen=True)
class ScaleCase:
    """One scaled case: which end of the range, the power of two applied, and the largest |input| reached."""

    end: str
    exponent: int
    largest: float

    @property
    def factor(self) -> float:
        return 2.0 ** self.exponent

    def text(self) -> str:
        """What a failure message names: the scale, never the shape."""
        return f"inputs scaled by 2^{self.exponent} (largest |input| {self.largest:.3g})"


def scalable(task: Task) -> dict[str, Magnitude]:
    """Input name -> its declared (or default) range, for the inputs a scaled case multiplies."""
    return {p.name: m for p in task.inputs if (m := task.magnitude_for(p)) is not None}


def _largest(a: np.ndarray) -> float:
    if a.size == 0:
        return 0.0
    with np.errstate(invalid="ignore"):
        m = float(np.nanmax(np.abs(a.astype(np.float64, copy=False))))
    return m if math.isfinite(m) else 0.0


def target_exponent(task: Task, inputs: dict[str, np.ndarray], end: str) -> int | None:
    """The power of two that takes the draw to ``end`` of every scaled input's range together: at the high
    end no input passes its own ``high``; at the low end every input's largest |value| is at most its
    ``low``. None where nothing would move (no scalable input, all zeros, or the draw is there already)."""
    ranges = scalable(task)
    exps: list[int] = []
    for name, m in ranges.items():
        big = _largest(inputs[name])
        if big <= 0:
            continue
        if end == "high":
            exps.append(math.floor(math.log2(m.high / big)))
        else:
            exps.append(math.floor(math.log2(m.low / big)))
    if not exps:
        return None
    e = min(exps)                      # high: no input past its high; low: every input at or below its low
    return e if abs(e) >= 2 else None


def scaled(task: Task, inputs: dict[str, np.ndarray], exponent: int) -> dict[str, np.ndarray]:
    """The draw with every scalable input multiplied by 2**exponent (exact: a power of two), in its dtype."""
    ranges = scalable(task)
    out = {}
    for name, a in inputs.items():
        if name in ranges:
            with np.errstate(over="ignore", under="ignore"):
                out[name] = np.ascontiguousarray(np.ldexp(a, exponent).astype(a.dtype, copy=False))
        else:
            out[name] = a
    return out


def fits(task: Task, ref: dict[str, np.ndarray], base: dict[str, np.ndarray]) -> bool:
    """The scaled reference is usable: finite wherever the unscaled one was, and inside each float output's
    dtype (an fp16 output cannot hold 1e5)."""
    for p in task.outputs:
        if not p.dtype.is_float:
            continue
        r = np.asarray(ref[p.name], dtype=np.float64)
        b = np.asarray(base[p.name], dtype=np.float64)
        with np.errstate(invalid="ignore"):
            if np.any(~np.isfinite(r) & np.isfinite(b)):
                return False
            finite = np.isfinite(r)
            if finite.any() and float(np.abs(r[finite]).max()) > _DTYPE_MAX[p.dtype.value]:
                return False
    return True


def atol_factors(task: Task, ref: dict[str, np.ndarray], base: dict[str, np.ndarray]) -> dict[str, float]:
    """Per float output: how much its largest |value| moved (the absolute tolerance moves with it)."""
    out = {}
    for p in task.outputs:
        if not p.dtype.is_float:
            continue
        b, r = _largest(np.asarray(base[p.name])), _largest(np.asarray(ref[p.name]))
        out[p.name] = r / b if b > 0 and r > 0 else 1.0
    return out


Reference = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


@dataclass
class Scaled:
    """A ready scaled case: its inputs, reference, tolerance factors and the scale it reached."""

    case: ScaleCase
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    atol_factor: dict[str, float]


def make(task: Task, base_inputs: dict[str, np.ndarray], base_ref: dict[str, np.ndarray], end: str,
         reference: Reference) -> Scaled | None:
    """The scaled case at ``end`` for one draw, stepping toward 1 (a quarter of the exponent each time) until
    the reference fits its dtype; None when no scale past x4 fits or nothing scales."""
    e = target_exponent(task, base_inputs, end)
    while e is not None and abs(e) >= 2:
        inputs = scaled(task, base_inputs, e)
        ref = reference(inputs)
        if fits(task, ref, base_ref):
            largest = max(_largest(inputs[n]) for n in scalable(task))
            return Scaled(ScaleCase(end, e, largest), inputs, ref, atol_factors(task, ref, base_ref))
        e = int(e * 3 / 4)
    return None
