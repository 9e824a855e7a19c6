"""The reference of a PyTorch task: the module itself, run by PyTorch (on a GPU where one is visible and
the case is large, else on the CPU).

A task folder made by ``cuda-llm import`` holds the module file and a generated reference.py that calls
``TorchReference``. For each case it sets the file's size constants to the case's sizes, seeds PyTorch from
the case's generator, and calls the file's own ``get_inputs()`` and ``Model(*get_init_inputs())``: the
inputs and the weights are what KernelBench would use, drawn fresh per case. The reference then loads the
weights the kernel was given and runs ``forward`` (promoted to float64 unless the task says ``native``).

torch is imported on first use, never when the task is only loaded (listing tasks needs no PyTorch).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from cuda_llm.tasks.torch_meta import TorchSource
from cuda_llm.tasks.torch_source import INSTALL_HINT


class TorchMissingError(ImportError):
    """PyTorch is not installed: say which extra brings it."""


def import_torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise TorchMissingError(f"this task's reference is a PyTorch module and PyTorch is not installed: "
                                f"{INSTALL_HINT}") from exc
    return torch


_LOADED: dict[str, ModuleType] = {}
_SIZES_LOCK = threading.RLock()


def load_module_file(path: Path) -> ModuleType:
    """Import a module file under a private name (two tasks may both call theirs ``module.py``)."""
    path = Path(path).resolve()
    key = str(path)
    if key in _LOADED:
        return _LOADED[key]
    name = f"cuda_llm_torch_module_{abs(hash(key)):x}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    _LOADED[key] = module
    return module


def seed_from(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**62))


class SizeSpace:
    """The file's size constants and what the module computes from them at import time.

    Constants: module-level positive ints (``batch_size = 16``, ``M = 16384 * 4``) and the elements of
    module-level tuples of ints written as literals (``input_shape = (32768,)`` gives ``input_shape_0``).
    Derived: module-level assignments whose value names a constant (``bias_shape = (out_channels, 1, 1)``,
    ``n = dim * 2``). Python evaluated those once when the file was imported, so changing a constant
    alone leaves them stale: ``apply`` sets the constants and evaluates the derived assignments again, in
    file order, so a case's sizes change everything that depends on them."""

    def __init__(self, module: ModuleType):
        self.module = module
        self.ints: dict[str, int] = {}
        self.tuples: dict[str, tuple[int, ...]] = {}
        self.derived: list[tuple[list[str], Any]] = []     # (target names, compiled expression)
        self.derived_names: set[str] = set()
        values = vars(module)
        for name, v in values.items():
            if _is_size_int(name, v):
                self.ints[name] = v
        for stmt in _module_assignments(module):
            targets = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
            if not targets:
                continue
            refs = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
            if refs & (set(self.ints) | set(self.tuples) | self.derived_names):
                self.derived.append((targets, compile(ast.Expression(stmt.value), "<sizes>", "eval")))
                self.derived_names.update(targets)
            elif isinstance(stmt.value, ast.Tuple):
                for t in targets:
                    v = values.get(t)
                    if isinstance(v, tuple) and v and all(_is_size_int("x", e) for e in v):
                        self.tuples[t] = v
        for t, v in self.tuples.items():
            for i, e in enumerate(v):
                name = f"{t}_{i}"
                if name not in values:
                    self.ints[name] = e

    @property
    def defaults(self) -> dict[str, int]:
        return dict(self.ints)

    @property
    def base(self) -> list[str]:
        """The constants a case may choose freely (the derived ones follow them)."""
        return [c for c in self.ints if c not in self.derived_names]

    def apply(self, sizes: dict[str, int] | None) -> dict[str, int]:
        """Set the constants (``sizes`` over the file's values), recompute what derives from them, and
        return every constant's value as the module now holds it. ``None`` restores the file's values."""
        sizes = dict(sizes or {})
        mod = self.module
        for c, v in self.ints.items():
            if c not in self.derived_names and not self._element(c):
                setattr(mod, c, int(sizes.get(c, v)))
        for t, v in self.tuples.items():
            setattr(mod, t, tuple(int(sizes.get(f"{t}_{i}", e)) for i, e in enumerate(v)))
        for targets, code in self.derived:
            try:
                value = eval(code, vars(mod))  # noqa: S307 - the user's own module-level expression
            except Exception:  # noqa: BLE001 - left as the file computed it
                continue
            for t in targets:
                setattr(mod, t, int(sizes[t]) if t in sizes and type(value) is int else value)
        return self.current()

    def snapshot(self) -> dict[str, Any]:
        """The module-level values ``apply`` may change, to put back as they were."""
        names = [c for c in self.ints if not self._element(c)] + list(self.tuples) + sorted(self.derived_names)
        return {n: getattr(self.module, n) for n in names if hasattr(self.module, n)}

    def restore(self, saved: dict[str, Any]) -> None:
        for n, v in saved.items():
            setattr(self.module, n, v)

    def current(self) -> dict[str, int]:
        mod = self.module
        out: dict[str, int] = {}
        for c in self.ints:
            el = self._element(c)
            if el is not None:
                out[c] = int(getattr(mod, el[0])[el[1]])
            else:
                v = getattr(mod, c, None)
                if type(v) is int:
                    out[c] = v
        return out

    def _element(self, c: str) -> tuple[str, int] | None:
        t, _, i = c.rpartition("_")
        if t in self.tuples and i.isdigit() and int(i) < len(self.tuples[t]) and c not in vars(self.module):
            return t, int(i)
        return None


def _is_size_int(name: str, v: Any) -> bool:
    return type(v) is int and v > 0 and not name.startswith("_") and name.isidentifier()


def _module_assignments(module: ModuleType) -> list[ast.Assign]:
    """The file's top-level ``name = value`` statements (none where the source cannot be read)."""
    try:
        tree = ast.parse(Path(module.__file__ or "").read_text())
    except (OSError, SyntaxError, ValueError):
        return []
    return [s for s in tree.body if isinstance(s, ast.Assign)]


class ModuleRunner:
    """A module file's Model, inputs and forward at given sizes: shared by the reference, the baseline
    timer and the import's dry runs."""

    def __init__(self, module: ModuleType, meta: TorchSource):
        self.torch = import_torch()
        self.module = module
        self.meta = meta
        self.space = SizeSpace(module)
        self.defaults = {c: v for c, v in self.space.defaults.items() if c in meta.constants}

    def set_sizes(self, sizes: dict[str, int] | None) -> dict[str, int]:
        """The file's size constants take the case's values (get_inputs and get_init_inputs read them),
        and what the file derives from them follows; None restores the file's own. Hold ``at`` instead
        wherever another thread may use the module."""
        return self.space.apply({k: v for k, v in (sizes or {}).items() if k in self.space.ints})

    @contextmanager
    def at(self, sizes: dict[str, int] | None) -> Iterator[dict[str, int]]:
        """The module at the case's sizes for the duration (yields every constant's value), then as it was.
        One lock for every module file: the judge computes references and inputs in threads, and the
        sizes are the module's globals."""
        with _SIZES_LOCK:
            saved = self.space.snapshot()
            try:
                yield self.set_sizes(sizes)
            finally:
                self.space.restore(saved)

    def build(self, sizes: dict[str, int] | None, seed: int, device: str = "cpu") -> tuple[Any, list[Any]]:
        """(model, inputs) as the file makes them, seeded: weights from the module's own initialisation."""
        torch = self.torch
        with self.at(sizes), torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            inputs = list(self.module.get_inputs())
            init = list(getattr(self.module, "get_init_inputs", lambda: [])())
            cls = getattr(self.module, self.meta.class_name)
            with torch.device(device):
                model = cls(*init)
        model.train(self.meta.mode == "train")
        return model, inputs

    def state_tensor(self, model: Any, key: str) -> Any:
        try:
            return model.get_parameter(key)
        except AttributeError:
            return model.get_buffer(key)

    def load_weights(self, model: Any, weights: dict[str, np.ndarray]) -> None:
        """Copy the kernel's weights (by entry-point name) into the model's parameters and buffers."""
        torch = self.torch
        with torch.no_grad():
            for w in self.meta.weights:
                t = self.state_tensor(model, w.key)
                t.copy_(torch.from_numpy(np.ascontiguousarray(weights[w.param])).reshape(t.shape))

    def outputs(self, result: Any) -> list[Any]:
        torch = self.torch
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
        if not all(isinstance(o, torch.Tensor) for o in outs):
            raise TypeError(f"forward returned {type(result).__name__}, not a tensor or a tuple of tensors")
        return outs


class TorchReference:
    """make_inputs and reference for one task folder (see the module docstring)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._runner: ModuleRunner | None = None

    @property
    def meta(self) -> TorchSource:
        return self.runner.meta

    @property
    def runner(self) -> ModuleRunner:
        if self._runner is None:
            import_torch()                  # before the module file imports it: a clear error without PyTorch
            data = tomllib.loads((self.folder / "task.toml").read_text())
            meta = TorchSource.model_validate(data["torch"])
            self._runner = ModuleRunner(load_module_file(self.folder / meta.module), meta)
        return self._runner

    def make_inputs(self, sizes: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
        """forward()'s tensor inputs from get_inputs() and the weights from Model(...), seeded from ``rng``
        (a float or int argument is the task's scalar parameter, not drawn)."""
        r = self.runner
        torch = r.torch
        model, inputs = r.build(sizes, seed_from(rng))
        if len(inputs) != len(r.meta.inputs):
            raise ValueError(f"get_inputs() returned {len(inputs)} tensors at {sizes}, the task has "
                             f"{len(r.meta.inputs)} inputs")
        out = {name: _numpy(t) for name, t in zip(r.meta.inputs, inputs) if isinstance(t, torch.Tensor)}
        for w in r.meta.weights:
            out[w.param] = _numpy(r.state_tensor(model, w.key).detach())
        return out

    def model_with(self, inputs: dict[str, Any], sizes: dict[str, int], *, device: str = "cpu",
                   promote: bool = False) -> tuple[Any, list[Any]]:
        """The module with the kernel's weights and forward()'s arguments, on ``device``; ``promote`` turns
        floating tensors (and the module) to float64. A bool tensor comes back from its 0/1 bytes; a scalar
        is the value the kernel was given."""
        torch = self.runner.torch
        r = self.runner
        model, _ = r.build(sizes, seed=0)
        r.load_weights(model, inputs)
        model = model.to(device)
        bools = set(r.meta.bool_tensors)
        args: list[Any] = []
        for n in r.meta.inputs:
            v = inputs[n]
            if not isinstance(v, np.ndarray):
                args.append(v.item() if hasattr(v, "item") else v)
                continue
            t = torch.from_numpy(np.ascontiguousarray(v)).to(device)
            args.append(t.bool() if n in bools else t)
        if promote:
            model = model.double()
            args = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        return model, args

    def reference(self, inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
        """forward(), float64 unless the task is ``native``; one array per output name. It runs on the GPU
        where one is visible and the case is large (reference_device), else on the CPU."""
        torch = self.runner.torch
        device = reference_device(torch, sum(int(getattr(v, "nbytes", 0)) for v in inputs.values()))
        with self.runner.at(sizes):          # a forward that reads a size constant reads the case's
            model, args = self.model_with(inputs, sizes, device=device, promote=self.meta.reference_dtype == "float64")
            with torch.no_grad(), _no_tf32(torch):
                outs = self.runner.outputs(model(*args))
        if len(outs) != len(self.meta.outputs):
            raise ValueError(f"forward returned {len(outs)} tensors, the task has {len(self.meta.outputs)} outputs")
        result = {name: _numpy(o) for name, o in zip(self.meta.outputs, outs)}
        if device != "cpu":
            del model, args, outs
            torch.cuda.empty_cache()
        return result


GPU_REFERENCE_BYTES = 64 << 20      # inputs from this size up run their reference on a visible GPU


def reference_device(torch: Any, nbytes: int) -> str:
    """``$CUDA_LLM_REFERENCE_DEVICE`` (cpu or cuda) if set; else cuda for a large case where PyTorch sees a
    GPU (float64 there is exact too, and minutes faster at KernelBench's sizes), else cpu."""
    forced = os.environ.get("CUDA_LLM_REFERENCE_DEVICE", "").strip().lower()
    if forced in ("cpu", "cuda"):
        return forced
    try:
        gpu = torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - a broken driver: the CPU
        gpu = False
    return "cuda" if gpu and nbytes >= GPU_REFERENCE_BYTES else "cpu"


class _no_tf32:  # noqa: N801 - a context manager
    """TF32 off for the reference's matmuls and convolutions (float32 stays float32 on a GPU)."""

    def __init__(self, torch: Any):
        self.torch = torch

    def __enter__(self) -> None:
        b = self.torch.backends
        self.saved = (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32)
        b.cuda.matmul.allow_tf32 = b.cudnn.allow_tf32 = False

    def __exit__(self, *exc: Any) -> None:
        b = self.torch.backends
        b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = self.saved


def _numpy(t: Any) -> np.ndarray:
    """A contiguous host copy; a bool tensor as its 0/1 bytes (uint8, the entry point's dtype)."""
    a = np.ascontiguousarray(t.detach().cpu().contiguous().numpy())
    return a.view(np.uint8) if a.dtype == np.bool_ else a
