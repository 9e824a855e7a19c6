"""What a task's numbers allow: its tightest relative tolerance and its float input dtypes. Pure.

One home for these facts: the bandit filters features with them (no reduced precision on a 1e-4 task)
and compute_peaks.py reads tf32 tensor-core use as plain TF32 or as 3xTF32 by the tolerance (plain TF32
needs ~1e-3).
"""

from __future__ import annotations

from typing import Any

TF32_RTOL = 1e-3                 # plain TF32 inputs (10-bit mantissa) need about this relative tolerance
TENSOR_FAMILIES = frozenset({"matmul", "convolution", "attention", "clustering"})   # GEMM-shaped work


def tightest_rtol(task: Any) -> float:
    """The tightest relative tolerance among the task's float outputs; 0 when an output must be exact
    (integers) or a tolerance is an expression."""
    tols: list[float] = []
    for out in task.outputs:
        if not out.dtype.is_float:
            return 0.0
        rtol = task.tolerance_for(out).rtol
        if not isinstance(rtol, (int, float)):
            return 0.0
        tols.append(float(rtol))
    return min(tols) if tols else 0.0


def float_input_dtypes(task: Any) -> list[str]:
    """The dtypes of the task's float inputs, e.g. ['float16'] for a half-precision GEMM."""
    return sorted({p.dtype.value for p in task.inputs if p.dtype.is_float})


def allows_plain_tf32(task: Any) -> bool:
    """Whether plain TF32 products (10-bit mantissa inputs) can pass the task's tolerance; where not, a
    kernel on tf32 tensor cores must split its inputs (3xTF32) to keep fp32 accuracy."""
    return tightest_rtol(task) >= TF32_RTOL
