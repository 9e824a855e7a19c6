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

from cuda_llm.tasks.import_limits import (CONV_PEAK_FACTOR, ImportLimits, clip, default_max_memory, error_line, estimate,
                                          human_bytes, is_allocation_failure, is_dtype_error)
from cuda_llm.tasks.shape_cases import CASES, KEEP_BELOW, SHOWN, halved_case, odd_case, shrink
from cuda_llm.tasks.torch_meta import TorchSource
from cuda_llm.tasks.torch_reference import ModuleRunner, import_torch, load_module_file
from cuda_llm.tasks.torch_source import (KERNELBENCH_TOLERANCE, REFERENCE_PY, SUPPORTED_DTYPES, ModuleFileError,
                                         ModuleRecord, TensorRecord, c_name, module_sha256, naive_cu, render_toml,
                                         task_dict, task_name, unsupported_dtype)
from cuda_llm.paths import cache_dir
from cuda_llm.tasks.formulas import evaluate
from cuda_llm.tasks.model import Task
from cuda_llm.tasks.task_folder import TaskError, load_task_folder

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
    seeds: int | None = None          # cases at the file's own shape (default 1 where sizes vary, else 3)
    mode: str = "train"
    atol: float | None = None
    rtol: float | None = None
    flops: str | None = None
    bytes: str | None = None
    reference_dtype: str | None = None        # None: float64 where the module runs in it, else native


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


@dataclass
class Forward:
    """One forward at some sizes: the model, forward()'s arguments, the outputs, the flops and aten ops,
    and every size constant's value as the module held it (derived ones included)."""

    model: Any
    inputs: list[Any]
    outs: list[Any]
    tuple_output: bool
    flops: int
    ops: list[str]
    sizes: dict[str, int]


def _forward(runner: ModuleRunner, sizes: dict[str, int] | None, device: str, seed: int = 0) -> Forward:
    """Model(*get_init_inputs())(*get_inputs()) at ``sizes`` on ``device`` ("meta": shapes only), seeded,
    counting flops and recording ops. Raises what the module raises."""
    torch = runner.torch
    from torch.utils.flop_counter import FlopCounterMode

    with runner.at(sizes) as effective, torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with torch.device(device):
            inputs = list(runner.module.get_inputs())
            init = list(getattr(runner.module, "get_init_inputs", lambda: [])())
            model = getattr(runner.module, runner.meta.class_name)(*init)
        model.train(runner.meta.mode == "train")
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
        rec = _OpRecorder()
        with torch.no_grad(), FlopCounterMode(display=False) as fc, rec.mode:
            result = model(*inputs)
    return Forward(model=model, inputs=inputs, outs=runner.outputs(result), tuple_output=isinstance(result, (tuple, list)),
                   flops=int(fc.get_total_flops()), ops=rec.ops, sizes=effective)


@dataclass
class _Names:
    inputs: list[str]
    weights: list[tuple[str, str]]      # (entry-point name, state_dict key)
    outputs: list[str]


def _shapes(runner: ModuleRunner, fwd: Forward, names: _Names) -> dict[str, tuple[int, ...]]:
    """Every tensor of the entry point's shape (scalars left out), by entry-point name."""
    torch = runner.torch
    if len(fwd.inputs) != len(names.inputs) or len(fwd.outs) != len(names.outputs):
        raise ValueError("a different number of inputs or outputs than the file's own sizes give")
    shapes: dict[str, tuple[int, ...]] = {}
    for n, t in zip(names.inputs, fwd.inputs):
        if isinstance(t, torch.Tensor):
            shapes[n] = tuple(t.shape)
    for n, key in names.weights:
        shapes[n] = tuple(runner.state_tensor(fwd.model, key).shape)
    for n, t in zip(names.outputs, fwd.outs):
        shapes[n] = tuple(t.shape)
    return shapes


class _Stage:
    """Turns what a module raises during one step of the import into that file's error: an allocation
    failure is named as one (the machine's limit, not the module's fault), anything else says the step."""

    def __init__(self, path: Path, what: str):
        self.path, self.what = path, what

    def __enter__(self) -> "_Stage":
        return self

    def __exit__(self, typ: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is None or isinstance(exc, ModuleFileError) or not isinstance(exc, Exception):
            return False
        raise failure(self.path, exc, self.what) from None


class ImportMemoryError(ModuleFileError):
    """The importing machine ran out of memory: the module may be fine; nothing about the task changed."""


def failure(path: Path, exc: BaseException, what: str) -> ModuleFileError:
    """One line for the table: the step, and an allocation failure named as such."""
    if isinstance(exc, ModuleFileError):
        return exc
    if is_allocation_failure(exc):
        return ImportMemoryError(path, f"out of memory {what} ({error_line(exc, 160)}); import it on a machine "
                                       f"with more memory or raise --max-memory")
    return ModuleFileError(path, f"{what} failed: {error_line(exc)}")


def _check_inputs(path: Path, runner: ModuleRunner, fwd: Forward, arg_names: list[str]) -> None:
    torch = runner.torch
    if not fwd.inputs:
        raise ModuleFileError(path, "get_inputs() must return a non-empty list of tensors")
    for i, x in enumerate(fwd.inputs):
        if not isinstance(x, (torch.Tensor, float, int)) or isinstance(x, bool):
            raise ModuleFileError(path, f"get_inputs() returned a {type(x).__name__} at position {i}; forward()'s "
                                        f"inputs here are tensors, floats and ints (make it a module constant or "
                                        f"a constructor argument)")
    if not fwd.outs:
        raise ModuleFileError(path, "forward returned an empty tuple")
    for n, t in zip(arg_names, fwd.inputs):
        if isinstance(t, torch.Tensor):
            _entry_dtype(path, f"input {n!r} (get_inputs()[{arg_names.index(n)}])", t)
    for i, t in enumerate(fwd.outs):
        _entry_dtype(path, f"output {i} of forward", t)


def _entry_dtype(path: Path, what: str, t: Any) -> tuple[str, bool]:
    """(the entry point's dtype, a bool tensor?): bool travels as uint8 0/1; an unsupported dtype is refused."""
    dt = _dtype_name(t)
    if dt == "bool":
        return "uint8", True
    if dt not in SUPPORTED_DTYPES:
        raise unsupported_dtype(path, what, dt)
    return dt, False


def _check_deterministic(path: Path, runner: ModuleRunner, fwd: Forward) -> None:
    torch = runner.torch
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(12345)
        with torch.no_grad():
            again = runner.outputs(fwd.model(*fwd.inputs))
    if any(not torch.equal(a, b) for a, b in zip(fwd.outs, again)
           if not (a.isnan().any() if a.is_floating_point() else False)):
        raise ModuleFileError(path, "forward gives different outputs for the same inputs and weights (dropout or "
                                    "another random op): a kernel cannot be checked against it. If the randomness "
                                    "is only in training mode, import with --eval-mode")


def _weights(path: Path, runner: ModuleRunner, fwd: Forward, taken: set[str]
             ) -> tuple[list[tuple[str, str, str, Any]], list[str]]:
    """[(entry name, key, kind, tensor)] for parameters and buffers; integer buffers (and buffers of an
    unsupported dtype) that the output does not depend on are left out: BatchNorm's int64
    num_batches_tracked is a counter no kernel reads."""
    found: list[tuple[str, str, str, Any]] = []
    dropped: list[str] = []
    for kind, items in (("parameter", fwd.model.named_parameters()), ("buffer", fwd.model.named_buffers())):
        for key, t in items:
            dt = _dtype_name(t)
            if kind == "buffer" and (dt not in SUPPORTED_DTYPES or not t.is_floating_point()) \
                    and not _output_depends_on(runner, fwd, key):
                dropped.append(key)
                continue
            _entry_dtype(path, f"the module's {kind} {key!r}", t)
            found.append((c_name(key, taken), key, kind, t))
    return found, dropped


def _output_depends_on(runner: ModuleRunner, fwd: Forward, key: str) -> bool:
    torch = runner.torch
    other = copy.deepcopy(fwd.model)
    buf = other.get_buffer(key)
    try:
        with torch.no_grad():
            if buf.dtype == torch.bool:
                buf.logical_not_()
            else:
                buf.add_(7)
            again = runner.outputs(other(*fwd.inputs))
    except Exception:  # noqa: BLE001 - forward fails with it changed (an index out of range): it reads it
        return True
    return any(not torch.equal(a, b) for a, b in zip(fwd.outs, again))


def _name_dims(shapes0: dict[str, tuple[int, ...]], constants: dict[str, int],
               moved: dict[str, tuple[int, dict[str, tuple[int, ...]]]]) -> tuple[dict[str, list[int | str]], list[str]]:
    """Each dimension: the constant it equals and follows, a per-shape size if it moves otherwise, else a literal."""
    dims: dict[str, list[int | str]] = {}
    derived: list[str] = []
    for tname, shape in shapes0.items():
        row: list[int | str] = []
        for i, d in enumerate(shape):
            follows = [c for c, (v2, sh) in moved.items()
                       if d == constants[c] and len(sh[tname]) == len(shape) and sh[tname][i] == v2]
            changes = any(len(sh[tname]) != len(shape) or sh[tname][i] != d for _, sh in moved.values())
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


def _flops_formula(f0: int, constants: dict[str, int], moved: dict[str, tuple[int, int]]) -> str | int | None:
    """``k * a * b * ...`` when the flop count is a monomial in the size constants, else None."""
    if f0 == 0:
        return 0 if all(fl == 0 for _, fl in moved.values()) else None
    factors: list[str] = []
    denom = 1
    for c, (v2, fl) in moved.items():
        if fl <= 0:
            return None
        e = math.log(fl / f0) / math.log(v2 / constants[c])
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
    return float(evaluate(formula, sizes))


def _close(a: np.ndarray, b: np.ndarray, atol: float, rtol: float) -> tuple[bool, float]:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore"):
        diff = np.abs(a64 - b64)
        ok = (diff <= atol + rtol * np.abs(b64)) | (a64 == b64)
    finite = np.isfinite(diff)
    return bool(ok.all()), float(diff[finite].max()) if finite.any() else 0.0


def parse_sizes(text: str, constants: dict[str, int], path: Path, flag: str = "--shape") -> dict[str, int]:
    """``batch_size=7,dim=100`` -> the file's sizes with those constants changed."""
    sizes: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not value.strip().lstrip("-").isdigit():
            raise ModuleFileError(path, f"{flag} {text!r}: write NAME=INT pairs separated by commas")
        if key not in constants:
            raise ModuleFileError(path, f"{flag} {text!r}: {key!r} is not an int constant of the file; the file's "
                                        f"constants are {', '.join(sorted(constants)) or '(none)'}")
        if int(value) <= 0:
            raise ModuleFileError(path, f"{flag} {text!r}: {key} must be positive")
        sizes[key] = int(value)
    if not sizes:
        raise ModuleFileError(path, f"{flag} {text!r}: no NAME=INT pair")
    return sizes


# ------------------------------------------------------------------------------------------- derivation
CASE_ELEMENTS = 1 << 21          # a varied case's largest tensor, at most (elements)
CASE_FLOPS = 1e9                 # and its forward's counted flops: the CPU reference stays well under a second


class _Deriver:
    """The steps of ``derive``, sharing the file, its runner and what earlier steps found."""

    def __init__(self, path: Path, opts: ImportOptions, limits: ImportLimits):
        self.path, self.opts, self.limits = path, opts, limits
        self.notes: list[str] = []

    # -- 1. the file, its constants, and the shapes at the file's sizes on the meta device
    def load(self, declared: tuple[list[str], list[str]] | None) -> None:
        path, opts = self.path, self.opts
        import_torch()     # says which extra to install where PyTorch is missing, before anything else
        self.text = path.read_text()
        self.module = _load(path)
        _check_layout(path, self.module, opts.class_name)
        meta = TorchSource(module_sha256="-", class_name=opts.class_name, inputs=[], outputs=[],
                           constants=[], mode=opts.mode)  # provisional: the runner's view
        with _Stage(path, "reading the file's sizes"):
            self.runner = ModuleRunner(self.module, meta)
        self.constants = self.runner.space.defaults
        meta.constants = sorted(self.constants)
        self.runner.defaults = dict(self.constants)
        if declared:
            opts.shapes = [parse_sizes(s, self.constants, path) for s in declared[0]]
            opts.held_out = [parse_sizes(s, self.constants, path, "--held-out") for s in declared[1]]
        if opts.shapes and not opts.held_out:
            raise ModuleFileError(path, "declared shapes need at least one held-out shape too (--held-out), never "
                                        "shown to the LLM")

    def full_size_shapes(self) -> None:
        """Every tensor's shape and dtype at the file's sizes, from the meta device (nothing allocated);
        where some op has no meta kernel, a CPU dry run when its estimated cost fits --max-memory."""
        path, runner = self.path, self.runner
        self._check_input_kinds()
        self.device = "meta"
        try:
            self.full = _forward(runner, None, "meta")
        except Exception as exc:  # noqa: BLE001 - some ops have no meta kernel
            meta_exc = exc
            if is_allocation_failure(meta_exc):
                raise failure(path, meta_exc, "on the meta device") from None
            self.device = "cpu"
            need = self._meta_input_bytes()
            if need is not None and need * CONV_PEAK_FACTOR > self.limits.max_memory:
                raise ImportMemoryError(path, f"some op has no meta-device kernel ({error_line(meta_exc, 120)}) and "
                                              f"a CPU dry run at the file's sizes could need "
                                              f"{human_bytes(need * CONV_PEAK_FACTOR)}, above --max-memory "
                                              f"{human_bytes(self.limits.max_memory)}") from None
            with _Stage(path, "the dry run at the file's own sizes"):
                self.full = _forward(runner, None, "cpu")
            self.notes.append("The module has no meta-device kernels for some op, so sizes were found by CPU dry runs.")
        cls = getattr(self.module, self.opts.class_name)
        self.arg_names = _input_names(cls, len(self.full.inputs))
        _check_inputs(path, runner, self.full, self.arg_names)

    def _check_input_kinds(self) -> None:
        """get_inputs() on the meta device: a list of tensors, floats and ints (what else it holds is refused
        before any forward)."""
        torch = self.runner.torch
        try:
            with self.runner.at(None), torch.device("meta"):
                inputs = self.module.get_inputs()
        except Exception:  # noqa: BLE001 - it needs a real device: the dry run says what fails
            return
        if not isinstance(inputs, (list, tuple)) or not inputs:
            raise ModuleFileError(self.path, "get_inputs() must return a non-empty list of tensors")
        for i, x in enumerate(inputs):
            if not isinstance(x, (torch.Tensor, float, int)) or isinstance(x, bool):
                raise ModuleFileError(self.path, f"get_inputs() returned a {type(x).__name__} at position {i}; "
                                                 f"forward()'s inputs here are tensors, floats and ints (make it a "
                                                 f"module constant or a constructor argument)")

    def _meta_input_bytes(self) -> int | None:
        torch = self.runner.torch
        try:
            with self.runner.at(None), torch.device("meta"):
                inputs = list(self.module.get_inputs())
                init = list(getattr(self.module, "get_init_inputs", lambda: [])())
                model = getattr(self.module, self.opts.class_name)(*init)
            ts = [x for x in inputs if isinstance(x, torch.Tensor)] + list(model.state_dict().values())
            return int(sum(t.numel() * t.element_size() for t in ts))
        except Exception:  # noqa: BLE001 - unknown: the CPU run decides
            return None

    # -- 2. the entry point's names and which dimension follows which constant
    def name_tensors(self) -> None:
        torch = self.runner.torch
        full, path = self.full, self.path
        taken: set[str] = set()
        self.in_names = [c_name(n, taken) for n in self.arg_names]
        weights = [(c_name(k, taken), k, kind, t) for kind, items in
                   (("parameter", full.model.named_parameters()), ("buffer", full.model.named_buffers()))
                   for k, t in items]
        self.out_names = [c_name("out" if len(full.outs) == 1 else f"out{i}", taken) for i in range(len(full.outs))]
        self.all_weights = weights
        self.scalars = {n: x for n, x in zip(self.in_names, full.inputs) if not isinstance(x, torch.Tensor)}
        del path

    def vary_constants_alone(self) -> None:
        """Each constant changed alone (meta): which dimensions follow it, and the flops' exponents."""
        names = self.names_all()
        self.shapes0 = _shapes(self.runner, self.full, names)
        self.moved: dict[str, tuple[int, dict[str, tuple[int, ...]]]] = {}
        self.moved_flops: dict[str, tuple[int, int]] = {}
        for c, v in sorted(self.constants.items()):
            for v2 in (v + 1, 2 * v):
                try:
                    fwd = _forward(self.runner, {c: v2}, self.device)
                    self.moved[c] = (v2, _shapes(self.runner, fwd, names))
                    self.moved_flops[c] = (v2, fwd.flops)
                    break
                except Exception:  # noqa: BLE001 - a constant that cannot change (a dim index, a group count)
                    continue
        self.ties = self._tie_equal_constants(names)
        self.dims, self.derived = _name_dims(self.shapes0, self.constants, self.moved)

    def _tie_equal_constants(self, names: _Names) -> dict[str, str]:
        """Constants that cannot change alone but can together with others of the same value (HingeLoss
        broadcasts targets of batch_size against predictions' last dimension, input_shape[0]; a depthwise
        convolution's out_channels must be a multiple of in_channels): tied, the first names the
        dimensions and the others follow it in every case."""
        ties: dict[str, str] = {}
        stuck = [c for c in sorted(self.constants) if c not in self.moved and self.constants[c] >= KEEP_BELOW]
        for c in stuck:
            if c in ties:
                continue
            group = [o for o in sorted(self.constants) if o != c and o not in ties and c not in ties.values()
                     and self.constants[o] == self.constants[c]]
            if not group:
                continue
            v2 = self.constants[c] + 1
            try:
                fwd = _forward(self.runner, {c: v2, **{o: v2 for o in group}}, self.device)
                self.moved[c] = (v2, _shapes(self.runner, fwd, names))
                self.moved_flops[c] = (v2, fwd.flops)
            except Exception:  # noqa: BLE001 - they cannot change together either
                continue
            ties.update({o: c for o in group})
            for o in group:                  # a tied constant names nothing: the first one does
                self.moved.pop(o, None)
                self.moved_flops.pop(o, None)
        return ties

    def names_all(self) -> _Names:
        return _Names(inputs=[n for n in self.in_names],
                      weights=[(n, k) for n, k, _, _ in self.all_weights], outputs=self.out_names)

    # -- 3. the correctness cases: the file's constants varied (meta dry runs), small and distinct
    def used_constants(self) -> list[str]:
        named = {d for row in self.dims.values() for d in row if isinstance(d, str)}
        return [c for c in sorted(self.constants) if c in named]

    def case(self, sizes: dict[str, int]) -> tuple[dict[str, int], Forward, dict[str, tuple[int, ...]]]:
        """A case's complete sizes (derived constants and dimensions from a dry run), checked against the
        named dimensions; raises where the module fails there or a dimension no longer follows the sizes."""
        sizes = {**sizes, **{o: sizes[c] for o, c in self.ties.items() if c in sizes}}
        fwd = _forward(self.runner, sizes, self.device)
        shapes = _shapes(self.runner, fwd, self.names_all())
        full = {c: v for c, v in fwd.sizes.items() if c in self.constants}
        for n in self.derived:
            tname, _, idx = n.rpartition("_dim")
            full[n] = int(shapes[tname][int(idx)])
        for t, row in self.dims.items():
            want = tuple(full[d] if isinstance(d, str) else d for d in row)
            got = tuple(shapes[t])
            if got != want and not (got == () and want == (1,)):
                raise ValueError(f"{t} has shape {list(got)}, but the sizes give {list(want)}; a dimension the "
                                 f"file's constants do not determine changed")
        return full, fwd, shapes

    def _fit(self, cand: dict[str, int]) -> tuple[dict[str, int], Forward] | None:
        """The candidate, shrunk until its largest tensor and its flops are small, if the module runs there."""
        for _ in range(60):
            try:
                full, fwd, shapes = self.case(cand)
            except Exception:  # noqa: BLE001 - the module does not accept these sizes
                return None
            if _small(shapes, fwd):
                return full, fwd
            smaller = shrink(cand)
            if smaller is None:
                return None
            cand = smaller
        return None

    def varied_cases(self) -> list[tuple[dict[str, int], Forward]]:
        """Up to CASES cases of distinct sizes, each smaller than the file's; [] (and the reason) where the
        sizes cannot vary."""
        space = self.runner.space
        values = {c: self.constants[c] for c in self.used_constants() if c in space.base}
        self.fixed_reason = ""
        if not any(v >= KEEP_BELOW for v in values.values()):
            self.fixed_reason = ("no size constant of the file names a dimension" if not values else
                                 f"its size constants ({', '.join(f'{c}={v}' for c, v in values.items())}) are "
                                 f"below {KEEP_BELOW}")
            return []
        bench = {c: v for c, v in self.constants.items()}
        cases: list[tuple[dict[str, int], Forward]] = []
        seen: set[tuple] = set()
        for k in range(CASES + 6):
            if len(cases) == CASES:
                break
            got = (self._fit(odd_case(values, k)) or self._as_odd_as_possible(values, k)
                   or self._fit(odd_case(values, k, keep_equal=True))
                   or self._fit(halved_case(values, k, keep_equal=True)))
            if got is not None:
                key = tuple(sorted(got[0].items()))
                if key in seen:              # shrunk onto an earlier case (one large constant): a neighbour
                    got = self._neighbour(got[0], values, seen)
                    if got is None:
                        continue
                    key = tuple(sorted(got[0].items()))
                if all(got[0].get(c) == v for c, v in bench.items()):
                    continue
                seen.add(key)
                cases.append(got)
        if len(cases) < SHOWN + 1:
            self.fixed_reason = (f"the module runs at only {len(cases)} distinct smaller sizes of those tried (odd "
                                 f"sizes, and the file's halved)")
            return []
        return cases

    def _as_odd_as_possible(self, values: dict[str, int], k: int) -> tuple[dict[str, int], Forward] | None:
        """Where odd sizes break the module (a group count must divide the channels): the file's sizes
        halved, then each constant made odd in turn where the module still runs."""
        odd = odd_case(values, k)
        got = self._fit(halved_case(values, k)) or self._fit(halved_case(values, k, again=False)) \
            or self._divided(values)
        if got is None:
            return None
        for c in odd:
            cand = {x: got[0][x] for x in values if x in got[0]}
            if cand.get(c) == odd[c]:
                continue
            trial = self._fit({**cand, c: odd[c]})
            if trial is not None:
                got = trial
        return got

    def _divided(self, values: dict[str, int]) -> tuple[dict[str, int], Forward] | None:
        """The file's sizes divided by the largest power of two the module accepts (a constant that names
        no dimension, such as 512 groups, must still divide them), within four times the cost limits."""
        for shift in range(12, 0, -1):
            cand = {c: (v >> shift if v >= KEEP_BELOW and v % (1 << shift) == 0 else v) for c, v in values.items()}
            try:
                full, fwd, shapes = self.case(cand)
            except Exception:  # noqa: BLE001
                continue
            if _small(shapes, fwd, 4):
                return full, fwd
        return None

    def _neighbour(self, full: dict[str, int], values: dict[str, int], seen: set[tuple]
                   ) -> tuple[dict[str, int], Forward] | None:
        """A case next to ``full`` (one constant a little larger or smaller) not seen yet, within four times
        the cost limits: where the limits shrink every case onto the same sizes."""
        base = {c: full[c] for c in values if c in full}
        for c in sorted(base, key=lambda c: -base[c]):
            for delta in (-2, 2, -1, 1, -4, 4, 6, -6, 8, 10):
                v = base[c] + delta
                if v < 1 or v >= values[c]:
                    continue
                try:
                    got, fwd, shapes = self.case({**base, c: v})
                except Exception:  # noqa: BLE001
                    continue
                if tuple(sorted(got.items())) not in seen and _small(shapes, fwd, 4):
                    return got, fwd
        return None

    def declared(self, sizes: dict[str, int], label: str) -> tuple[dict[str, int], Forward]:
        try:
            full, fwd, shapes = self.case(sizes)
        except ValueError as exc:
            raise ModuleFileError(self.path, f"{label} {sizes}: {exc}") from None
        except Exception as exc:  # noqa: BLE001
            if is_allocation_failure(exc):
                raise failure(self.path, exc, f"at {label} {sizes}") from None
            raise ModuleFileError(self.path, f"{label} {sizes}: the module fails at these sizes: "
                                             f"{error_line(exc)}") from None
        if shapes == self.shapes0:
            raise ModuleFileError(self.path, f"{label} {sizes}: no tensor's shape changes at these sizes (the module "
                                             f"does not read {', '.join(sorted(sizes))} where its shapes are made); "
                                             f"give constants its tensors follow: "
                                             f"{', '.join(self.used_constants()) or '(none)'}")
        return full, fwd

    # -- 4. the real checks, on the CPU at small sizes: a forward, determinism, buffers read, scalars
    def small_checks(self, probe: dict[str, int] | None) -> None:
        path = self.path
        if probe is None:
            est = estimate(self.tensor_bytes(), self.full.flops, "cpu", self.convolution())
            if est.peak_bytes > self.limits.max_memory:
                raise ImportMemoryError(path, f"its sizes cannot vary ({self.fixed_reason}) and a forward at the "
                                              f"file's sizes needs about {human_bytes(est.peak_bytes)}, above "
                                              f"--max-memory {human_bytes(self.limits.max_memory)}")
        where = "at small sizes" if probe is not None else "at the file's own sizes"
        with _Stage(path, f"the dry run {where}"):
            fwd = _forward(self.runner, probe, "cpu")
        _check_inputs(path, self.runner, fwd, self.arg_names)
        for n, x in zip(self.in_names, fwd.inputs):
            if n in self.scalars and x != self.scalars[n]:
                raise ModuleFileError(path, f"forward()'s argument {n!r} is {self.scalars[n]!r} at the file's sizes "
                                            f"and {x!r} at others: a scalar argument must be one value")
        with _Stage(path, f"the determinism check {where}"):
            _check_deterministic(path, self.runner, fwd)
        with _Stage(path, f"the buffer check {where}"):
            found, self.dropped = _weights(path, self.runner, fwd, set())
        keep = {k for _, k, _, _ in found}
        self.weights = [(n, k, kind, t) for n, k, kind, t in self.all_weights if k in keep]
        self.probe, self.probe_where = fwd, where

    def convolution(self) -> bool:
        return family_of(self.full.ops) == "convolution"

    def tensor_bytes(self) -> int:
        torch = self.runner.torch
        tensors = [x for x in self.full.inputs if isinstance(x, torch.Tensor)] + list(self.full.outs) \
            + [t for _, _, _, t in self.all_weights]
        return int(sum(t.numel() * t.element_size() for t in tensors))

    # -- 5. the reference's dtype, decided at small sizes; float64 falls back only on a dtype error
    def reference_dtype(self, record: ModuleRecord) -> str:
        if self.opts.reference_dtype:
            return self.opts.reference_dtype
        fwd = self.probe
        try:
            outs64 = _promoted(self.runner, fwd.model, fwd.inputs)
        except Exception as exc:  # noqa: BLE001
            if is_allocation_failure(exc):
                raise failure(self.path, exc, f"in the float64 reference run {self.probe_where}") from None
            if is_dtype_error(exc):
                self.notes.append(f"The reference runs in the module's own dtypes (float64 failed: "
                                  f"{error_line(exc, 160)}).")
                return "native"
            raise ModuleFileError(self.path, f"the float64 reference run {self.probe_where} failed, and not for a "
                                             f"dtype: {error_line(exc)}") from None
        self._compare(record, fwd.outs, outs64, self.probe_where)
        return "float64"

    def _compare(self, record: ModuleRecord, outs: list[Any], outs64: list[Any], where: str) -> None:
        torch = self.runner.torch
        for t, a, b in zip(record.of_role("output"), outs, outs64):
            a, b = a.detach().cpu(), b.detach().cpu()
            if not a.is_floating_point():       # indices (argmax): compared exactly, so a near tie can flip
                if not torch.equal(a, b.to(a.dtype)):
                    n = int((a != b.to(a.dtype)).sum())
                    self.notes.append(f"PyTorch's own {t.dtype} output {t.name} differs from the float64 reference "
                                      f"in {n} of {a.numel()} elements {where} (near ties decided differently by "
                                      f"the rounding); integer outputs are compared exactly, so a kernel may fail "
                                      f"there too: consider --native-reference.")
                continue
            tol = record.tolerance.get(t.dtype)
            if tol is None:
                continue
            ok, worst = _close(a.float().numpy(), b.double().numpy(), *tol)
            if not ok:
                self.notes.append(f"PyTorch's own {t.dtype} output {t.name} differs from the float64 reference by up "
                                  f"to {worst:.3g} {where}, beyond the tolerance (atol {tol[0]:g}, rtol {tol[1]:g}); "
                                  f"consider a larger tolerance (--atol/--rtol).")

    # -- 6. the file's sizes, when the estimate fits: PyTorch's own dtype against float64 there
    def full_size_check(self, record: ModuleRecord) -> None:
        lim = self.limits
        est = estimate(self.tensor_bytes(), self.full.flops, lim.device, self.convolution())
        self.estimate = est
        if self.probe_where == "at the file's own sizes":
            return
        if est.peak_bytes > lim.max_memory or est.seconds > lim.max_seconds:
            why = (f"above --max-memory {human_bytes(lim.max_memory)}" if est.peak_bytes > lim.max_memory
                   else f"above the {lim.max_seconds:.0f} s the import gives it")
            self.notes.append(f"The float64 comparison ran at small sizes only: at the file's sizes, {est.describe()}, "
                              f"{why}.")
            return
        if record.reference_dtype != "float64":
            return
        if lim.device == "cpu" and self.convolution():
            # PyTorch's CPU convolutions unfold their input (measured: up to 52x the tensors for a Conv3d)
            self.notes.append("The float64 comparison ran at small sizes only: a convolution's peak memory on "
                              "the CPU is not estimated reliably (it runs at the file's sizes where PyTorch sees "
                              "a GPU).")
            return
        torch = self.runner.torch
        try:
            fwd = _forward(self.runner, None, lim.device)
            outs64 = _promoted(self.runner, fwd.model, fwd.inputs)
            self._compare(record, fwd.outs, outs64, "at the file's sizes")
        except Exception as exc:  # noqa: BLE001 - the task is decided; this check only adds a warning
            what = "ran out of memory" if is_allocation_failure(exc) else f"failed ({error_line(exc, 120)})"
            self.notes.append(f"The float64 comparison at the file's sizes {what}; the task is as the small sizes "
                              f"decided it.")
        finally:
            if lim.device == "cuda":
                torch.cuda.empty_cache()


def default_limits() -> ImportLimits:
    """Half the available memory; the full-size check on the GPU where PyTorch sees one."""
    torch = import_torch()
    try:
        gpu = bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken driver: the CPU
        gpu = False
    return ImportLimits(max_memory=default_max_memory(), device="cuda" if gpu else "cpu")


def _small(shapes: dict[str, tuple[int, ...]], fwd: Forward, factor: float = 1) -> bool:
    """A case the CPU reference runs in well under a second: its largest tensor and its counted flops."""
    biggest = max((math.prod(s) for s in shapes.values()), default=0)
    return biggest <= CASE_ELEMENTS * factor and fwd.flops <= CASE_FLOPS * factor


def _promoted(runner: ModuleRunner, model: Any, inputs: list[Any]) -> list[Any]:
    """forward() with the module and its floating inputs in float64 (TF32 off where it runs on a GPU)."""
    torch = runner.torch
    m64 = copy.deepcopy(model).double()
    args = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    with torch.no_grad():
        return runner.outputs(m64(*args))


def derive(path: Path, options: ImportOptions | None = None, declared: tuple[list[str], list[str]] | None = None,
           limits: ImportLimits | None = None) -> ModuleRecord:
    """Run the checks and the dry runs and record what the task needs (see the module docstring).

    ``declared``: the --shape and --held-out texts, parsed against the file's constants here. Any error
    of the module comes back as a ModuleFileError naming the file and the step (ImportMemoryError where
    the machine ran out of memory)."""
    opts = options or ImportOptions()
    path = Path(path)
    if not path.is_file():
        raise ModuleFileError(path, "no such file")
    d = _Deriver(path, opts, limits or default_limits())
    d.load(declared)
    d.full_size_shapes()
    d.name_tensors()
    with _Stage(path, "the size search"):
        d.vary_constants_alone()
        cases = d.varied_cases()
    shape_runs = [d.declared(s, "--shape") for s in opts.shapes]
    held_runs = [d.declared(s, "--held-out") for s in opts.held_out]
    d.small_checks(cases[0][0] if cases else None)

    torch = d.runner.torch
    dims = d.dims
    entry = {n: _entry_dtype(path, n, t) for n, t in zip(d.in_names, d.full.inputs) if isinstance(t, torch.Tensor)}
    entry.update({n: _entry_dtype(path, n, t) for n, _, _, t in d.weights})
    entry.update({n: _entry_dtype(path, n, t) for n, t in zip(d.out_names, d.full.outs)})
    record_tensors = []
    for n, x, a in zip(d.in_names, d.full.inputs, d.arg_names):
        if n in d.scalars:
            record_tensors.append(TensorRecord(name=n, role="input", source=a, dims=[],
                                               dtype="float32" if isinstance(x, float) else "int32", scalar=x))
        else:
            record_tensors.append(TensorRecord(name=n, role="input", source=a, dtype=entry[n][0], dims=dims[n],
                                               bool_tensor=entry[n][1]))
    record_tensors += [TensorRecord(name=n, role="weight", source=k, kind=kind, dtype=entry[n][0], dims=dims[n],
                                    bool_tensor=entry[n][1]) for n, k, kind, _ in d.weights]
    record_tensors += [TensorRecord(name=n, role="output", source=f"output {i}", dtype=entry[n][0], dims=dims[n],
                                    bool_tensor=entry[n][1]) for i, n in enumerate(d.out_names)]
    constants = d.constants
    used = d.used_constants()
    varied = sorted({k for s in opts.shapes + opts.held_out for k in s})
    first_use = [x for t in record_tensors for x in t.dims if isinstance(x, str) and x in constants]
    order = list(dict.fromkeys(first_use + varied + [o for o, c in d.ties.items() if c in first_use]))
    if d.ties:
        d.notes.append("Sizes that change only together: " + ", ".join(f"{o} = {c}" for o, c in d.ties.items())
                     + " in every case.")
    bench = {c: constants[c] for c in order}
    for n in d.derived:
        tname, _, idx = n.rpartition("_dim")
        bench[n] = int(d.shapes0[tname][int(idx)])
    seeds = opts.seeds if opts.seeds is not None else (1 if cases else 3)
    record = ModuleRecord(name=opts.name or task_name(path.stem), source_file=str(path.resolve()), module_text=d.text,
                          class_name=opts.class_name, tensors=record_tensors, tuple_output=d.full.tuple_output,
                          constants=order, derived=d.derived, benchmark=bench,
                          family=family_of(d.full.ops), ops=d.full.ops, mode=opts.mode, seeds=seeds,
                          init_inputs=_init_repr(d.module), dropped_buffers=d.dropped, fixed_sizes=d.fixed_reason)
    notes = record.notes            # the record's own list (pydantic copied the constructor's)

    def only(sizes: dict[str, int]) -> dict[str, int]:
        return {k: v for k, v in sizes.items() if k in order or k in d.derived}

    shown = [(only(s), f) for s, f in cases[:SHOWN] + shape_runs]
    held = [(only(s), f) for s, f in cases[SHOWN:] + held_runs]
    all_runs = shown + held

    # flops: declared, a monomial in the constants, else a per-shape size from the dry runs
    if opts.flops is not None:
        record.flops = opts.flops
    else:
        formula = _flops_formula(d.full.flops, constants, {c: m for c, m in d.moved_flops.items() if c in used})
        if formula is not None and all(abs(_eval_flops(formula, {**constants, **s}) - f.flops) < 0.5
                                       for s, f in all_runs):
            record.flops = formula
        else:
            record.flops = FLOPS_SIZE
            record.benchmark[FLOPS_SIZE] = d.full.flops
            for s, f in all_runs:
                s[FLOPS_SIZE] = f.flops
            notes.append(f"{FLOPS_SIZE} is the forward's matmul/convolution flop count at each shape "
                         "(torch.utils.flop_counter), no simple formula of the sizes.")
    record.shapes = [s for s, _ in shown]
    record.held_out = [s for s, _ in held]
    if opts.bytes is not None:
        record.bytes_override = opts.bytes

    # tolerance: KernelBench's per dtype unless given; the reference in float64 where the module runs in it
    for dt in sorted({t.dtype for t in record.of_role("output")}):
        if dt in ("float32", "float16"):
            record.tolerance[dt] = (opts.atol if opts.atol is not None else KERNELBENCH_TOLERANCE[dt],
                                    opts.rtol if opts.rtol is not None else KERNELBENCH_TOLERANCE[dt])
    record.reference_dtype = d.reference_dtype(record)     # type: ignore[assignment]
    d.full_size_check(record)
    if d.fixed_reason:
        notes.append(f"The sizes cannot vary ({d.fixed_reason}): every case is the file's own shape, over "
                     f"{seeds} seeds, none held out.")
    record.estimate = d.estimate.describe()
    notes[:0] = d.notes
    return record


def _init_repr(module: Any) -> str:
    try:
        text = ", ".join(repr(a) for a in getattr(module, "get_init_inputs", lambda: [])())
    except Exception:  # noqa: BLE001
        return ""
    return clip(text, 200)


# --------------------------------------------------------------------------------------------- folders
def write_task_folder(record: ModuleRecord, out_root: Path, *, force: bool = False) -> tuple[Path, str]:
    """Write ``out_root/<name>/`` (module.py, task.toml, reference.py, naive.cu) and load it back.
    Returns (folder, "written" | "unchanged"). An existing folder from another module is kept unless
    ``force``: a user's edits to task.toml are not lost by a second import."""
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
                declared: tuple[list[str], list[str]] | None = None, force: bool = False,
                limits: ImportLimits | None = None) -> tuple[Path, str]:
    record = derive(path, options, declared, limits)
    return write_task_folder(record, out_root, force=force)


IMPORTED_ENV = "CUDA_LLM_IMPORTED"     # where module files given as tasks are imported (default: the cache)
REFUSED_FILE = "refused.txt"


def imported_root() -> Path:
    """The folder of imported module files: $CUDA_LLM_IMPORTED (a folder that can travel with a batch's runs),
    else the cache's torch_tasks/."""
    env = os.environ.get(IMPORTED_ENV)
    return Path(env).resolve() if env else cache_dir() / "torch_tasks"


def cached_import(path: Path) -> tuple[Path | None, str | None]:
    """What an earlier import of this file's contents left: (its task folder, None), (None, the reason it was
    refused), or (None, None) when it was never imported."""
    path = Path(path)
    root = imported_root() / module_sha256(path.read_text())[:16]
    folder = root / task_name(path.stem)
    if (folder / "task.toml").is_file():
        return folder, None
    if (root / REFUSED_FILE).is_file():
        return None, (root / REFUSED_FILE).read_text().strip()
    return None, None


def import_cached(path: Path) -> Path:
    """The task folder for a module file given where a task is expected (`cuda-llm optimize m.py`): imported
    once into the cache, keyed by the file's contents, and reused while the file is unchanged. A refusal is
    kept too (its reason, raised again without a second import); one for want of memory is a fact about the
    machine, not the file, and is not kept."""
    path = Path(path)
    text = path.read_text()
    root = imported_root() / module_sha256(text)[:16]
    name = task_name(path.stem)
    folder, refused = cached_import(path)
    if folder is not None:
        return folder
    if refused is not None:
        raise ModuleFileError(path, refused)
    try:
        return import_file(path, root, ImportOptions(name=name))[0]
    except ImportMemoryError:
        raise
    except ModuleFileError as exc:
        root.mkdir(parents=True, exist_ok=True)
        (root / REFUSED_FILE).write_text(str(exc).removeprefix(f"{path}: ") + "\n")
        raise
