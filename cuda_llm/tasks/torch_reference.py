"""The reference of a PyTorch task: the module itself, run by PyTorch on the CPU.

A task folder made by ``cuda-llm import`` holds the module file and a generated reference.py that calls
``TorchReference``. For each case it sets the file's size constants to the case's sizes, seeds PyTorch from
the case's generator, and calls the file's own ``get_inputs()`` and ``Model(*get_init_inputs())``: the
inputs and the weights are what KernelBench would use, drawn fresh per case. The reference then loads the
weights the kernel was given and runs ``forward`` (promoted to float64 unless the task says ``native``).

torch is imported on first use, never when the task is only loaded (listing tasks needs no PyTorch).
"""

from __future__ import annotations

import importlib.util
import sys
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


class ModuleRunner:
    """A module file's Model, inputs and forward at given sizes: shared by the reference, the baseline
    timer and the import's dry runs."""

    def __init__(self, module: ModuleType, meta: TorchSource):
        self.torch = import_torch()
        self.module = module
        self.meta = meta
        self.defaults = {c: getattr(module, c) for c in meta.constants if hasattr(module, c)}

    def set_sizes(self, sizes: dict[str, int] | None) -> None:
        """The file's size constants take the case's values (get_inputs and get_init_inputs read them)."""
        for c, default in self.defaults.items():
            value = sizes.get(c, default) if sizes else default
            setattr(self.module, c, int(value))

    def build(self, sizes: dict[str, int] | None, seed: int, device: str = "cpu") -> tuple[Any, list[Any]]:
        """(model, inputs) as the file makes them, seeded: weights from the module's own initialisation."""
        torch = self.torch
        self.set_sizes(sizes)
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                inputs = list(self.module.get_inputs())
                init = list(getattr(self.module, "get_init_inputs", lambda: [])())
                cls = getattr(self.module, self.meta.class_name)
                with torch.device(device):
                    model = cls(*init)
        finally:
            self.set_sizes(None)
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
        """forward()'s inputs from get_inputs() and the weights from Model(...), seeded from ``rng``."""
        r = self.runner
        model, inputs = r.build(sizes, seed_from(rng))
        if len(inputs) != len(r.meta.inputs):
            raise ValueError(f"get_inputs() returned {len(inputs)} tensors at {sizes}, the task has "
                             f"{len(r.meta.inputs)} inputs")
        out = {name: _numpy(t) for name, t in zip(r.meta.inputs, inputs)}
        for w in r.meta.weights:
            out[w.param] = _numpy(r.state_tensor(model, w.key).detach())
        return out

    def model_with(self, inputs: dict[str, np.ndarray], sizes: dict[str, int], *, device: str = "cpu",
                   promote: bool = False) -> tuple[Any, list[Any]]:
        """The module with the kernel's weights and forward()'s input tensors, on ``device``; ``promote``
        turns floating tensors (and the module) to float64."""
        torch = self.runner.torch
        r = self.runner
        model, _ = r.build(sizes, seed=0)
        r.load_weights(model, inputs)
        model = model.to(device)
        args = [torch.from_numpy(np.ascontiguousarray(inputs[n])).to(device) for n in r.meta.inputs]
        if promote:
            model = model.double()
            args = [a.double() if a.is_floating_point() else a for a in args]
        return model, args

    def reference(self, inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
        """forward() on the CPU, float64 unless the task is ``native``; one array per output name."""
        torch = self.runner.torch
        model, args = self.model_with(inputs, sizes, promote=self.meta.reference_dtype == "float64")
        with torch.no_grad():
            outs = self.runner.outputs(model(*args))
        if len(outs) != len(self.meta.outputs):
            raise ValueError(f"forward returned {len(outs)} tensors, the task has {len(self.meta.outputs)} outputs")
        return {name: _numpy(o) for name, o in zip(self.meta.outputs, outs)}


def _numpy(t: Any) -> np.ndarray:
    return np.ascontiguousarray(t.detach().cpu().contiguous().numpy())
