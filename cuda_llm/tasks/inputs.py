"""Random inputs and reference outputs for one case: pure NumPy, no GPU, so it is testable anywhere."""

from __future__ import annotations

import numpy as np

from cuda_llm.tasks.formulas import evaluate, evaluate_int
from cuda_llm.tasks.loader import LoadedTask
from cuda_llm.tasks.model import Param, Sizes, Task


def dims(param: Param, sizes: Sizes) -> tuple[int, ...]:
    assert param.shape is not None
    return tuple(evaluate_int(d, sizes) for d in param.shape)


def scalar_value(param: Param, sizes: Sizes) -> int | float:
    expr = param.value if param.value is not None else param.name
    value = evaluate(expr, sizes)
    return float(value) if param.dtype.is_float else int(value)


def _draw(param: Param, sizes: Sizes, rng: np.random.Generator) -> np.ndarray:
    shape = dims(param, sizes)
    g = param.generator
    dtype = np.dtype(param.dtype.numpy)
    if g.kind == "normal":
        arr = rng.normal(g.mean, g.std, size=shape)
    elif g.kind == "uniform":
        arr = rng.uniform(evaluate(g.low, sizes), evaluate(g.high, sizes), size=shape)
    elif g.kind == "randint":
        arr = rng.integers(int(evaluate(g.low, sizes)), int(evaluate(g.high, sizes)), size=shape)
    else:
        raise ValueError(f"input {param.name} uses a custom generator; make_inputs must provide it")
    return np.ascontiguousarray(arr.astype(dtype))


def make_case_inputs(loaded: LoadedTask, sizes: Sizes, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Fresh inputs for every input pointer, shaped and typed as the task declares."""
    task = loaded.task
    custom = dict(loaded.make_inputs(sizes, rng)) if loaded.make_inputs else {}
    out: dict[str, np.ndarray] = {}
    for p in task.inputs:
        if p.name in custom:
            arr = np.ascontiguousarray(custom[p.name])
            want = dims(p, sizes)
            if arr.shape != want or arr.dtype != np.dtype(p.dtype.numpy):
                raise ValueError(
                    f"task {task.name}: make_inputs gave {p.name} as {arr.dtype}{arr.shape}, "
                    f"the task declares {p.dtype.value}{want}"
                )
            out[p.name] = arr
        else:
            out[p.name] = _draw(p, sizes, rng)
    return out


def scalar_inputs(task: Task, sizes: Sizes) -> dict[str, np.generic]:
    """Every scalar parameter's value at ``sizes``, typed as the kernel gets it (np.float32(2.5), np.int32(n))."""
    return {p.name: np.dtype(p.dtype.numpy).type(scalar_value(p, sizes)) for p in task.params if p.kind == "scalar"}


def reference_outputs(loaded: LoadedTask, inputs: dict[str, np.ndarray], sizes: Sizes) -> dict[str, np.ndarray]:
    """Run the reference on copies (so it cannot mutate the inputs) and check what it returns. The reference's
    inputs also hold every scalar parameter (a float ``alpha`` included) under its name."""
    task = loaded.task
    given = {**scalar_inputs(task, sizes), **{k: v.copy() for k, v in inputs.items()}}
    result = loaded.reference(given, dict(sizes))
    out: dict[str, np.ndarray] = {}
    for p in task.outputs:
        if p.name not in result:
            raise ValueError(f"task {task.name}: reference did not return output {p.name!r}")
        arr = np.asarray(result[p.name])
        want = dims(p, sizes)
        if arr.size != int(np.prod(want, dtype=np.int64)):
            raise ValueError(f"task {task.name}: reference output {p.name} has {arr.size} elements, expected {want}")
        out[p.name] = arr.reshape(want)
    return out


def output_buffers(task: Task, sizes: Sizes) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    return {p.name: (dims(p, sizes), np.dtype(p.dtype.numpy)) for p in task.outputs}
