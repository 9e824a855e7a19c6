"""One task folder loaded (task.toml, reference.py, naive.cu), with errors that name file and field.

Apart from loader.py (which finds tasks by name and imports PyTorch module files) so that the PyTorch
importer can load the folder it writes without importing the loader that calls it."""

from __future__ import annotations

import importlib.util
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable

import numpy as np
from pydantic import ValidationError

from cuda_llm.tasks.model import Sizes, Task

ReferenceFn = Callable[[dict[str, np.ndarray], Sizes], dict[str, np.ndarray]]
MakeInputsFn = Callable[[Sizes, np.random.Generator], dict[str, np.ndarray]]


class TaskError(ValueError):
    """A task folder that cannot be used; the message names the file and the field."""

    def __init__(self, path: Path, message: str):
        self.path = path
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True)
class LoadedTask:
    """A validated task with its reference code loaded."""

    task: Task
    reference: ReferenceFn
    make_inputs: MakeInputsFn | None

    @property
    def name(self) -> str:
        return self.task.name


def _format_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"field {loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def _load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"cuda_llm_task_ref_{name}", path)
    if spec is None or spec.loader is None:
        raise TaskError(path, "cannot be imported")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a user's file: any error is theirs to see
        raise TaskError(path, f"import failed: {type(exc).__name__}: {exc}") from exc
    return module


def load_task_folder(folder: Path) -> LoadedTask:
    """Load and validate one task folder (task.toml, reference.py, naive.cu)."""
    folder = Path(folder)
    toml_path = folder / "task.toml"
    if not toml_path.is_file():
        raise TaskError(folder, "no task.toml in this folder")
    try:
        data = tomllib.loads(toml_path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(toml_path, f"not valid TOML: {exc}") from None
    try:
        task = Task.model_validate({**data, "folder": folder})
    except ValidationError as exc:
        raise TaskError(toml_path, _format_validation(exc)) from None
    if task.name != folder.name:
        raise TaskError(toml_path, f"field name: {task.name!r} must match the folder name {folder.name!r}")
    if task.torch is not None:
        _check_torch_module(folder, task)
    if not (folder / "naive.cu").is_file():
        raise TaskError(folder, "naive.cu (the naive baseline that defines speedup 1.0) is missing")
    ref_path = folder / "reference.py"
    if not ref_path.is_file():
        raise TaskError(folder, "reference.py (defining reference(inputs, sizes)) is missing")
    module = _load_module(ref_path, task.name)
    reference = getattr(module, "reference", None)
    if not callable(reference):
        raise TaskError(ref_path, "must define reference(inputs, sizes) -> dict of outputs")
    make_inputs = getattr(module, "make_inputs", None)
    if make_inputs is not None and not callable(make_inputs):
        raise TaskError(ref_path, "make_inputs must be a function (sizes, rng) -> dict of inputs")
    if make_inputs is None:
        custom = [p.name for p in task.inputs if p.generator.kind == "custom"]
        if custom:
            raise TaskError(ref_path, f"inputs {custom} use generator 'custom' but make_inputs is not defined")
    return LoadedTask(task=task, reference=reference, make_inputs=make_inputs)


def _check_torch_module(folder: Path, task: Task) -> None:
    """A PyTorch task's module file must be the one its entry point was derived from."""
    import hashlib

    assert task.torch is not None
    module = folder / task.torch.module
    if not module.is_file():
        raise TaskError(folder, f"{task.torch.module} (the PyTorch module this task was imported from) is missing")
    if hashlib.sha256(module.read_bytes()).hexdigest() != task.torch.module_sha256:
        src = task.torch.source_file or str(module)
        raise TaskError(module, "changed since the task was imported (its entry point, sizes and flops were derived "
                                f"from the old one): import it again with `cuda-llm import kernelbench {src} --force`")
