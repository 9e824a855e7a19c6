"""A KernelBench-style module file -> a task folder: checks, dry runs, and the derived entry point.

The file defines ``class Model(nn.Module)``, ``get_inputs()`` and (optionally) ``get_init_inputs()``.
One dry run on the CPU at the file's own sizes gives every tensor's shape and dtype and proves that the
forward runs, returns tensors and is deterministic. Then each module-level int constant is changed in turn
(on the meta device, so nothing is computed) to see which dimensions follow it: a dimension that equals a
constant and follows it is named by it (``batch_size``); one that moves with a constant but is not equal
to it (a convolution's output height) becomes a size computed per shape (``out_dim2``); the rest are
literals. The flop count comes from torch.utils.flop_counter on the same dry runs (matmul, convolution,
attention; elementwise work counts nothing). Needs PyTorch; torch_source.py does the rest without it.
"""

from __future__ import annotations

import copy
import inspect
import math
import os
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cuda_llm.tasks.torch_meta import TorchSource
from cuda_llm.tasks.torch_reference import ModuleRunner, import_torch, load_module_file
from cuda_llm.tasks.torch_source import (KERNELBENCH_TOLERANCE, REFERENCE_PY, SUPPORTED_DTYPES, ModuleFileError,
                                         ModuleRecord, TensorRecord, c_name, check_dims, module_sha256, naive_cu,
                                         render_toml, task_dict, task_name, unsupported_dtype)

FLOPS_SIZE = "fwd_flops"       # a per-shape size holding the flop count when no formula fits

# aten op -> task family (the feature statistics are kept per family); the first family found wins
_FAMILIES = [
    ("attention", ("_scaled_dot_product", "scaled_dot_product")),
    ("convolution", ("convolution", "conv")),
    ("matmul", ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear")),
    ("normalization", ("native_layer_norm", "native_batch_norm", "native_group_norm", "_native_batch_norm",
                       "batch_norm", "layer_norm", "group_norm", "rms_norm", "_fused_rms_norm", "instance_norm")),
    ("pooling", ("max_pool", "avg_pool", "adaptive_")),
    ("scan", ("cumsum", "cumprod", "logcumsumexp", "cummax", "cummin")),
    ("loss", ("nll_loss", "mse_loss", "smooth_l1", "huber", "kl_div", "binary_cross_entropy", "margin",
              "cosine_embedding", "triplet")),
    ("reduction", ("sum", "mean", "amax", "amin", "max", "min", "prod", "_softmax", "_log_softmax", "var", "std",
                   "norm", "argmax", "argmin", "logsumexp", "linalg_vector_norm")),
]


def family_of(ops: list[str]) -> str:
    for fam, prefixes in _FAMILIES:
        for op in ops:
            if any(op == p or op.startswith(p) for p in prefixes):
                return fam
    return "elementwise"


@dataclass
class ImportOptions:
    """What the user may say at import (cuda-llm import kernelbench --help)."""

    name: str | None = None
    class_name: str = "Model"
    shapes: list[dict[str, int]] = field(default_factory=list)     # declared shapes (constants only)
    held_out: list[dict[str, int]] = field(default_factory=list)
    seeds: int = 3
    mode: str = "train"
    atol: float | None = None
    rtol: float | None = None
    flops: str | None = None
    bytes: str | None = None
    reference_dtype: str | None = None        # None: float64 where the module runs in it, else native


@dataclass
class DryRun:
    """Shapes of every tensor (by entry-point name), flops and aten ops of one forward."""

    shapes: dict[str, tuple[int, ...]]
    flops: int
    ops: list[str]


class ImportReport(dict):
    """What happened, for the CLI: the folder, the signature, warnings."""


# --------------------------------------------------------------------------------------------- checks
def _load(path: Path) -> Any:
    try:
        return load_module_file(path)
    except SyntaxError as exc:
        raise ModuleFileError(path, f"not valid Python (line {exc.lineno}: {exc.msg})") from None
    except Exception as exc:  # noqa: BLE001 - a user's file: any error is theirs to see
        raise ModuleFileError(path, f"import failed: {type(exc).__name__}: {exc}") from None


def _check_layout(path: Path, module: Any, class_name: str) -> None:
    torch = import_torch()
    cls = getattr(module, class_name, None)
    if cls is None:
        raise ModuleFileError(path, f"no class {class_name} (a KernelBench file defines `class {class_name}"
                                    f"(nn.Module)`, get_inputs() and get_init_inputs())")
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise ModuleFileError(path, f"{class_name} is not a torch.nn.Module subclass")
    if not callable(getattr(module, "get_inputs", None)):
        raise ModuleFileError(path, "get_inputs() is missing: it must return the list of forward()'s input tensors")
    init = getattr(module, "get_init_inputs", None)
    if init is not None and not callable(init):
        raise ModuleFileError(path, "get_init_inputs must be a function returning the constructor's arguments")


def _size_constants(module: Any) -> dict[str, int]:
    """Module-level positive ints (not bools, not private): the candidates for size names."""
    return {k: v for k, v in vars(module).items()
            if type(v) is int and v > 0 and not k.startswith("_") and k.isidentifier()}


def _input_names(cls: Any, n: int) -> list[str]:
    """forward()'s argument names for ``n`` positional inputs (x0, x1, ... past *args)."""
    try:
        params = list(inspect.signature(cls.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        params = []
    names: list[str] = []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and len(names) < n:
            names.append(p.name)
    while len(names) < n:
        names.append(f"x{len(names)}")
    return names


def _dtype_name(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


# -------------------------------------------------------------------------------------------- dry runs
class _OpRecorder:
    """The aten ops a forward runs (TorchDispatchMode), for the family and the 'fused' tag."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        ops: list[str] = []
        self.ops = ops

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: N802
                name = func.overloadpacket.__name__
                if name not in ops:
                    ops.append(name)
                return func(*args, **(kwargs or {}))

        self.mode = Mode()


def _run(runner: ModuleRunner, names: "_Names", sizes: dict[str, int] | None, device: str) -> DryRun:
    """One forward at ``sizes`` on ``device`` ("meta": shapes only), counting flops and recording ops."""
    torch = runner.torch
    from torch.utils.flop_counter import FlopCounterMode

    runner.set_sizes(sizes)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            with torch.device(device):
                inputs = list(runner.module.get_inputs())
                init = list(getattr(runner.module, "get_init_inputs", lambda: [])())
                model = getattr(runner.module, runner.meta.class_name)(*init)
            model.train(runner.meta.mode == "train")
            inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
            rec = _OpRecorder()
            with torch.no_grad(), FlopCounterMode(display=False) as fc, rec.mode:
                result = model(*inputs)
    finally:
        runner.set_sizes(None)
    outs = runner.outputs(result)
    shapes: dict[str, tuple[int, ...]] = {}
    if len(inputs) != len(names.inputs) or len(outs) != len(names.outputs):
        raise ValueError("a different number of inputs or outputs than the file's own sizes give")
    for n, t in zip(names.inputs, inputs):
        shapes[n] = tuple(t.shape)
    for n, key in names.weights:
        shapes[n] = tuple(runner.state_tensor(model, key).shape)
    for n, t in zip(names.outputs, outs):
        shapes[n] = tuple(t.shape)
    return DryRun(shapes=shapes, flops=int(fc.get_total_flops()), ops=rec.ops)


@dataclass
class _Names:
    inputs: list[str]
    weights: list[tuple[str, str]]      # (entry-point name, state_dict key)
    outputs: list[str]


def _fails(fn: Any, *args: Any) -> BaseException | None:
    try:
        fn(*args)
        return None
    except Exception as exc:  # noqa: BLE001
        return exc


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) < 400 else text[:400] + " ..."


def _first_dry_run(path: Path, runner: ModuleRunner) -> tuple[Any, list[Any], list[Any], bool]:
    """The real forward at the file's sizes on the CPU: (model, inputs, outputs, a tuple?), with the file's errors."""
    torch = runner.torch
    try:
        model, inputs = runner.build(None, seed=0)
    except Exception as exc:  # noqa: BLE001
        raise ModuleFileError(path, f"get_inputs(), get_init_inputs() or the constructor failed: {_short(exc)}") from None
    if not isinstance(inputs, list) or not inputs:
        raise ModuleFileError(path, "get_inputs() must return a non-empty list of tensors")
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            raise ModuleFileError(path, f"get_inputs() returned a {type(x).__name__} at position {i}; only tensors "
                                        f"can be forward()'s inputs here (make it a module constant or a constructor "
                                        f"argument)")
    try:
        with torch.no_grad():
            result = model(*inputs)
    except Exception as exc:  # noqa: BLE001
        raise ModuleFileError(path, f"forward failed on the dry run at the file's own sizes: {_short(exc)}") from None
    try:
        outs = runner.outputs(result)
    except TypeError as exc:
        raise ModuleFileError(path, f"{exc}; the output must be a tensor or a tuple of tensors") from None
    if not outs:
        raise ModuleFileError(path, "forward returned an empty tuple")
    return model, inputs, outs, isinstance(result, (tuple, list))


def _check_deterministic(path: Path, runner: ModuleRunner, model: Any, inputs: list[Any], outs: list[Any]) -> None:
    torch = runner.torch
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(12345)
        with torch.no_grad():
            again = runner.outputs(model(*inputs))
    if any(not torch.equal(a, b) for a, b in zip(outs, again) if not (a.isnan().any() if a.is_floating_point() else False)):
        raise ModuleFileError(path, "forward gives different outputs for the same inputs and weights (dropout or "
                                    "another random op): a kernel cannot be checked against it. If the randomness "
                                    "is only in training mode, import with --eval-mode")


def _weights(path: Path, runner: ModuleRunner, model: Any, inputs: list[Any], outs: list[Any],
             taken: set[str]) -> tuple[list[tuple[str, str, str, Any]], list[str]]:
    """[(entry name, key, kind, tensor)] for parameters and buffers; integer buffers (and buffers of an
    unsupported dtype) that the output does not depend on are left out: BatchNorm's int64
    num_batches_tracked is a counter no kernel reads."""
    found: list[tuple[str, str, str, Any]] = []
    dropped: list[str] = []
    for kind, items in (("parameter", model.named_parameters()), ("buffer", model.named_buffers())):
        for key, t in items:
            dt = _dtype_name(t)
            if kind == "buffer" and (dt not in SUPPORTED_DTYPES or not t.is_floating_point()) \
                    and not _output_depends_on(runner, model, inputs, outs, key):
                dropped.append(key)
                continue
            if dt not in SUPPORTED_DTYPES:
                raise unsupported_dtype(path, f"the module's {kind} {key!r}", dt)
            found.append((c_name(key, taken), key, kind, t))
    return found, dropped


def _output_depends_on(runner: ModuleRunner, model: Any, inputs: list[Any], outs: list[Any], key: str) -> bool:
    torch = runner.torch
    other = copy.deepcopy(model)
    buf = other.get_buffer(key)
    try:
        with torch.no_grad():
            buf.add_(7)
            again = runner.outputs(other(*inputs))
    except Exception:  # noqa: BLE001 - forward fails with it changed (an index out of range): it reads it
        return True
    return any(not torch.equal(a, b) for a, b in zip(outs, again))


def _name_dims(shapes0: dict[str, tuple[int, ...]], constants: dict[str, int],
               moved: dict[str, tuple[int, DryRun]]) -> tuple[dict[str, list[int | str]], list[str]]:
    """Each dimension: the constant it equals and follows, a per-shape size if it moves otherwise, else a literal."""
    dims: dict[str, list[int | str]] = {}
    derived: list[str] = []
    for tname, shape in shapes0.items():
        row: list[int | str] = []
        for i, d in enumerate(shape):
            follows = [c for c, (v2, run) in moved.items()
                       if d == constants[c] and len(run.shapes[tname]) == len(shape) and run.shapes[tname][i] == v2]
            changes = any(len(run.shapes[tname]) != len(shape) or run.shapes[tname][i] != d for _, run in moved.values())
            if len(follows) == 1:
                row.append(follows[0])
            elif changes:
                name = f"{tname}_dim{i}"
                derived.append(name)
                row.append(name)
            else:
                row.append(int(d))
        dims[tname] = row
    return dims, derived


def _flops_formula(f0: int, constants: dict[str, int], moved: dict[str, tuple[int, DryRun]]) -> str | int | None:
    """``k * a * b * ...`` when the flop count is a monomial in the size constants, else None."""
    if f0 == 0:
        return 0 if all(run.flops == 0 for _, run in moved.values()) else None
    factors: list[str] = []
    denom = 1
    for c, (v2, run) in moved.items():
        if run.flops <= 0:
            return None
        e = math.log(run.flops / f0) / math.log(v2 / constants[c])
        k = round(e)
        if abs(e - k) > 0.01 or not 0 <= k <= 4:
            return None
        factors += [c] * k
        denom *= constants[c] ** k
    coef = f0 / denom
    if abs(coef - round(coef)) > 1e-9 * max(1.0, coef) or round(coef) < 1:
        return None
    return " * ".join([str(int(round(coef)))] + factors) if factors else int(round(coef))


def _eval_flops(formula: str | int, sizes: dict[str, int]) -> float:
    from cuda_llm.tasks.formulas import evaluate

    return float(evaluate(formula, sizes))


def _close(a: np.ndarray, b: np.ndarray, atol: float, rtol: float) -> tuple[bool, float]:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore"):
        diff = np.abs(a64 - b64)
        ok = (diff <= atol + rtol * np.abs(b64)) | (a64 == b64)
    finite = np.isfinite(diff)
    return bool(ok.all()), float(diff[finite].max()) if finite.any() else 0.0


def parse_sizes(text: str, constants: dict[str, int], path: Path) -> dict[str, int]:
    """``batch_size=7,dim=100`` -> the file's sizes with those constants changed."""
    sizes: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not value.strip().lstrip("-").isdigit():
            raise ModuleFileError(path, f"--shape {text!r}: write NAME=INT pairs separated by commas")
        if key not in constants:
            raise ModuleFileError(path, f"--shape {text!r}: {key!r} is not an int constant of the file; the file's "
                                        f"constants are {', '.join(sorted(constants)) or '(none)'}")
        if int(value) <= 0:
            raise ModuleFileError(path, f"--shape {text!r}: {key} must be positive")
        sizes[key] = int(value)
    return sizes


# ------------------------------------------------------------------------------------------- derivation
def derive(path: Path, options: ImportOptions | None = None, declared: tuple[list[str], list[str]] | None = None
           ) -> ModuleRecord:
    """Run the checks and the dry runs and record what the task needs (see the module docstring).

    ``declared``: the --shape and --held-out texts, parsed against the file's constants here."""
    opts = options or ImportOptions()
    path = Path(path)
    if not path.is_file():
        raise ModuleFileError(path, "no such file")
    text = path.read_text()
    import_torch()     # says which extra to install where PyTorch is missing, before anything else
    module = _load(path)
    _check_layout(path, module, opts.class_name)
    constants = _size_constants(module)
    if declared:
        opts.shapes = [parse_sizes(s, constants, path) for s in declared[0]]
        opts.held_out = [parse_sizes(s, constants, path) for s in declared[1]]
    if (opts.shapes or opts.held_out) and not opts.held_out:
        raise ModuleFileError(path, "declared shapes need at least one held-out shape too (--held-out), never shown "
                                    "to the LLM; without any declared shape the file's own is tested over seeds")
    meta = TorchSource(module_sha256="-", class_name=opts.class_name, inputs=[], outputs=[],
                       constants=sorted(constants), mode=opts.mode)  # provisional: the runner's view
    runner = ModuleRunner(module, meta)
    model, inputs, outs, tuple_output = _first_dry_run(path, runner)
    _check_deterministic(path, runner, model, inputs, outs)

    taken: set[str] = set()
    cls = getattr(module, opts.class_name)
    in_names = [c_name(n, taken) for n in _input_names(cls, len(inputs))]
    weights, dropped = _weights(path, runner, model, inputs, outs, taken)
    out_names = [c_name("out" if len(outs) == 1 else f"out{i}", taken) for i in range(len(outs))]
    for n, t, arg in zip(in_names, inputs, _input_names(cls, len(inputs))):
        if _dtype_name(t) not in SUPPORTED_DTYPES:
            raise unsupported_dtype(path, f"input {arg!r} (get_inputs()[{in_names.index(n)}])", _dtype_name(t))
    for i, t in enumerate(outs):
        if _dtype_name(t) not in SUPPORTED_DTYPES:
            raise unsupported_dtype(path, f"output {i} of forward", _dtype_name(t))
    names = _Names(inputs=in_names, weights=[(n, k) for n, k, _, _ in weights], outputs=out_names)
    shapes0 = {n: tuple(t.shape) for n, t in zip(in_names, inputs)}
    shapes0.update({n: tuple(t.shape) for n, _, _, t in weights})
    shapes0.update({n: tuple(t.shape) for n, t in zip(out_names, outs)})

    # shapes only, on the meta device where the module runs there (else the CPU, slower)
    device = "meta"
    meta_run = None
    try:
        meta_run = _run(runner, names, None, "meta")
    except Exception:  # noqa: BLE001 - some ops have no meta kernel
        meta_run = None
    if meta_run is None or meta_run.shapes != shapes0:
        device = "cpu"
        meta_run = _run(runner, names, None, "cpu")
    moved: dict[str, tuple[int, DryRun]] = {}
    for c, v in sorted(constants.items()):
        for v2 in (v + 1, 2 * v):
            try:
                moved[c] = (v2, _run(runner, names, {c: v2}, device))
                break
            except Exception:  # noqa: BLE001 - a constant that cannot change (a dim index, a group count)
                continue
    dims, derived = _name_dims(shapes0, constants, moved)

    record_tensors = [TensorRecord(name=n, role="input", source=a, dtype=_dtype_name(t), dims=dims[n])
                      for n, t, a in zip(in_names, inputs, _input_names(cls, len(inputs)))]
    record_tensors += [TensorRecord(name=n, role="weight", source=k, kind=kind, dtype=_dtype_name(t), dims=dims[n])
                       for n, k, kind, t in weights]
    record_tensors += [TensorRecord(name=n, role="output", source=f"output {i}", dtype=_dtype_name(t), dims=dims[n])
                       for i, (n, t) in enumerate(zip(out_names, outs))]
    used = [c for c in sorted(constants) if any(c in t.dims for t in record_tensors)]
    varied = sorted({k for s in opts.shapes + opts.held_out for k in s})
    first_use = [d for t in record_tensors for d in t.dims if isinstance(d, str) and d in constants]
    order = list(dict.fromkeys(first_use + varied))
    bench = {c: constants[c] for c in order}
    for n in derived:
        tname, _, idx = n.rpartition("_dim")
        bench[n] = int(shapes0[tname][int(idx)])
    record = ModuleRecord(name=opts.name or task_name(path.stem), source_file=str(path.resolve()), module_text=text,
                          class_name=opts.class_name, tensors=record_tensors, tuple_output=tuple_output,
                          constants=order, derived=derived, benchmark=bench,
                          family=family_of(meta_run.ops), ops=meta_run.ops, mode=opts.mode, seeds=opts.seeds,
                          init_inputs=_init_repr(module), dropped_buffers=dropped)
    notes = record.notes            # the record's own list (pydantic copied the constructor's)

    # declared shapes: complete them (derived sizes from a dry run) and check every dimension follows
    def complete(sizes: dict[str, int], label: str) -> tuple[dict[str, int], DryRun]:
        full = {**{c: constants[c] for c in record.constants}, **sizes}
        try:
            run = _run(runner, names, full, device)
        except Exception as exc:  # noqa: BLE001
            raise ModuleFileError(path, f"{label} {sizes}: the module fails at these sizes: {_short(exc)}") from None
        for n in derived:
            tname, _, idx = n.rpartition("_dim")
            full[n] = int(run.shapes[tname][int(idx)])
        try:
            check_dims(record, full, run.shapes, f"{label} {sizes}")
        except ValueError as exc:
            raise ModuleFileError(path, str(exc)) from None
        return full, run

    shape_runs = [complete(s, "--shape") for s in opts.shapes]
    held_runs = [complete(s, "--held-out") for s in opts.held_out]
    record.shapes = [s for s, _ in shape_runs]
    record.held_out = [s for s, _ in held_runs]

    # flops: declared, a monomial in the constants, else a per-shape size from the dry runs
    if opts.flops is not None:
        record.flops = opts.flops
    else:
        formula = _flops_formula(meta_run.flops, constants, {c: m for c, m in moved.items() if c in used})
        if formula is not None and all(abs(_eval_flops(formula, s) - r.flops) < 0.5 for s, r in shape_runs + held_runs):
            record.flops = formula
        else:
            record.flops = FLOPS_SIZE
            record.benchmark[FLOPS_SIZE] = meta_run.flops
            for (s, r) in shape_runs + held_runs:
                s[FLOPS_SIZE] = r.flops
            notes.append(f"{FLOPS_SIZE} is the forward's matmul/convolution flop count at each shape "
                         "(torch.utils.flop_counter), no simple formula of the sizes.")
    if opts.bytes is not None:
        record.bytes_override = opts.bytes

    # tolerance: KernelBench's per dtype unless given; the reference in float64 where the module runs in it
    for dt in sorted({t.dtype for t in record.of_role("output")}):
        if dt in ("float32", "float16"):
            record.tolerance[dt] = (opts.atol if opts.atol is not None else KERNELBENCH_TOLERANCE[dt],
                                    opts.rtol if opts.rtol is not None else KERNELBENCH_TOLERANCE[dt])
    record.reference_dtype = opts.reference_dtype or _reference_dtype(runner, model, inputs, outs, record, notes)
    if device == "cpu":
        record.notes.append("The module has no meta-device kernels for some op, so sizes were found by CPU dry runs.")
    return record


def _init_repr(module: Any) -> str:
    try:
        text = ", ".join(repr(a) for a in getattr(module, "get_init_inputs", lambda: [])())
    except Exception:  # noqa: BLE001
        return ""
    return text if len(text) <= 200 else text[:200] + " ..."


def _reference_dtype(runner: ModuleRunner, model: Any, inputs: list[Any], outs: list[Any], record: ModuleRecord,
                     notes: list[str]) -> str:
    """float64 when the module runs promoted (an exact reference); warns when PyTorch's own float32 result
    is not within the task's tolerance of it (then no kernel is likely to be either)."""
    torch = runner.torch
    try:
        m64 = copy.deepcopy(model).double()
        with torch.no_grad():
            outs64 = runner.outputs(m64(*[x.double() if x.is_floating_point() else x for x in inputs]))
    except Exception as exc:  # noqa: BLE001 - an op without a float64 kernel, or a hard-coded dtype
        notes.append(f"The reference runs in the module's own dtypes (float64 failed: {_short(exc)[:120]}).")
        return "native"
    for t, a, b in zip(record.of_role("output"), outs, outs64):
        if not a.is_floating_point():       # indices (argmax): compared exactly, so a near tie can flip
            if not torch.equal(a, b):
                n = int((a != b).sum())
                notes.append(f"PyTorch's own {t.dtype} output {t.name} differs from the float64 reference in {n} of "
                             f"{a.numel()} elements at the file's sizes (near ties decided differently by the "
                             f"rounding); integer outputs are compared exactly, so a kernel may fail there too: "
                             f"consider --native-reference.")
            continue
        tol = record.tolerance.get(t.dtype)
        if tol is None:
            continue
        ok, worst = _close(a.float().numpy(), b.numpy(), *tol)
        if not ok:
            notes.append(f"PyTorch's own {t.dtype} output {t.name} differs from the float64 reference by up to "
                         f"{worst:.3g} at the file's sizes, beyond the tolerance (atol {tol[0]:g}, rtol {tol[1]:g}); "
                         f"consider a larger tolerance (--atol/--rtol).")
    return "float64"


# --------------------------------------------------------------------------------------------- folders
def write_task_folder(record: ModuleRecord, out_root: Path, *, force: bool = False) -> tuple[Path, str]:
    """Write ``out_root/<name>/`` (module.py, task.toml, reference.py, naive.cu) and load it back.
    Returns (folder, "written" | "unchanged"). An existing folder from another module is kept unless
    ``force``: a user's edits to task.toml are not lost by a second import."""
    from cuda_llm.tasks.loader import TaskError, load_task_folder
    from cuda_llm.tasks.model import Task

    data = task_dict(record)
    task = Task.model_validate(data)          # the derivation's own bugs surface here, before any file
    folder = Path(out_root) / record.name
    if (folder / "task.toml").is_file():
        try:
            old = tomllib.loads((folder / "task.toml").read_text()).get("torch", {}).get("module_sha256")
        except (tomllib.TOMLDecodeError, OSError):
            old = None
        if old == data["torch"]["module_sha256"] and not force:
            return folder, "unchanged"
        if not force:
            raise FileExistsError(f"{folder} already holds a task from another version of the module; pass --force "
                                  f"to replace it (its task.toml edits are lost) or --out another folder")
    tmp = folder.with_name(f".{folder.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "module.py").write_text(record.module_text)
    (tmp / "task.toml").write_text(render_toml(data))
    (tmp / "reference.py").write_text(REFERENCE_PY)
    (tmp / "naive.cu").write_text(naive_cu(task.signature, record))
    if folder.exists():
        shutil.rmtree(folder)
    os.replace(tmp, folder)
    try:
        load_task_folder(folder)
    except TaskError:
        raise
    return folder, "written"


def import_file(path: Path, out_root: Path, options: ImportOptions | None = None, *,
                declared: tuple[list[str], list[str]] | None = None, force: bool = False) -> tuple[Path, str]:
    record = derive(path, options, declared)
    return write_task_folder(record, out_root, force=force)


def import_cached(path: Path) -> Path:
    """The task folder for a module file given where a task is expected (`cuda-llm optimize m.py`): imported
    once into the cache, keyed by the file's contents, and reused while the file is unchanged."""
    from cuda_llm.paths import cache_dir

    path = Path(path)
    text = path.read_text()
    root = cache_dir() / "torch_tasks" / module_sha256(text)[:16]
    name = task_name(path.stem)
    folder = root / name
    if (folder / "task.toml").is_file():
        return folder
    return import_file(path, root, ImportOptions(name=name))[0]
