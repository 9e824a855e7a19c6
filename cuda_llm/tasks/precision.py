"""What a task's numbers allow: its tightest relative tolerance and its float input dtypes. Pure.

One home for these facts: the bandit filters features with them (no reduced precision on a 1e-4 task)
and the roofline picks the tensor-core roof a task may use (fp16 inputs; fp32 inputs through TF32, or
3xTF32 where the tolerance is tighter than TF32's ~1e-3).
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


def tensor_kind(task: Any) -> str | None:
    """The tensor-core path a correct kernel of this task may take: 'fp16' (half inputs, float
    accumulation: exact products), 'tf32' (fp32 inputs where ~1e-3 is allowed), '3xtf32' (fp32 inputs at
    fp32 accuracy: three TF32 products per multiply-add), or None (not GEMM-shaped, or no float inputs)."""
    if task.family not in TENSOR_FAMILIES:
        return None
    dtypes = float_input_dtypes(task)
    if not dtypes:
        return None
    if all(d in ("float16", "bfloat16") for d in dtypes):
        return "fp16"
    return "tf32" if tightest_rtol(task) >= TF32_RTOL else "3xtf32"
