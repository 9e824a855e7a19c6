"""Loading tasks from the built-in suite and from users' folders, with errors that name file and field."""

from __future__ import annotations

import os
from pathlib import Path

from cuda_llm.tasks.task_folder import (  # noqa: F401 - the names tasks/ and its users import from here
    LoadedTask, MakeInputsFn, ReferenceFn, TaskError, load_task_folder,
)

SUITE_DIR = Path(__file__).parent / "suite"
TASKS_PATH_ENV = "CUDA_LLM_TASKS"


def _import_module_file(path: Path) -> Path:
    # local: `cuda-llm tasks` and the worker child load this module; the PyTorch importer serves PyTorch tasks only
    from cuda_llm.tasks.torch_source import INSTALL_HINT, ModuleFileError

    try:
        # local: `cuda-llm tasks` and the worker child load this module; the PyTorch importer serves PyTorch tasks only
        from cuda_llm.tasks.torch_import import import_cached

        return import_cached(path)
    except ImportError as exc:
        if getattr(exc, "name", None) == "torch" or "PyTorch" in str(exc):
            raise TaskError(path, f"a PyTorch module needs PyTorch: {INSTALL_HINT}") from None
        raise
    except ModuleFileError as exc:
        raise TaskError(path, str(exc).removeprefix(f"{path}: ")) from None


def task_dirs(extra: list[Path] | None = None) -> list[Path]:
    """Folders searched for tasks: the built-in suite, $CUDA_LLM_TASKS (os.pathsep list), then extra.
    A folder that does not exist is an error (a typo would otherwise hide the user's tasks silently)."""
    dirs = [SUITE_DIR]
    env = os.environ.get(TASKS_PATH_ENV)
    named = [(Path(p).expanduser(), f"${TASKS_PATH_ENV}") for p in (env or "").split(os.pathsep) if p]
    named += [(Path(p).expanduser(), "--tasks-dir") for p in extra or []]
    for d, origin in named:
        if not d.is_dir():
            raise TaskError(d, f"no such folder (given by {origin}); fix the path or remove it")
        dirs.append(d)
    return dirs


def _candidates(dirs: list[Path]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for d in dirs:
        if (d / "task.toml").is_file():
            found[d.name] = d
            continue
        if d.is_dir():
            for sub in sorted(d.iterdir()):
                if (sub / "task.toml").is_file():
                    found[sub.name] = sub  # later folders override the built-in suite
    return found


def list_task_names(extra: list[Path] | None = None) -> list[str]:
    return sorted(_candidates(task_dirs(extra)))


def task_folder(name: str, extra: list[Path] | None = None) -> Path | None:
    """The folder of the task called ``name`` in the task folders (the suite, $CUDA_LLM_TASKS, extra), or
    None: how a command that checks a folder also takes the names `optimize` takes."""
    return _candidates(task_dirs(extra)).get(name)


def load_task(name_or_path: str | Path, extra: list[Path] | None = None) -> LoadedTask:
    """Load a task by name (searching the task folders) or by a path to its folder."""
    p = Path(name_or_path)
    if p.is_dir():
        return load_task_folder(p)
    if p.suffix == ".py" and p.is_file():       # a PyTorch module file: imported once into the cache
        return load_task_folder(_import_module_file(p))
    found = _candidates(task_dirs(extra))
    if str(name_or_path) not in found:
        known = ", ".join(sorted(found)) or "(none)"
        raise TaskError(p, f"no task named {name_or_path!r}; known tasks: {known}. "
                           f"Pass a task folder path or add folders with ${TASKS_PATH_ENV}.")
    return load_task_folder(found[str(name_or_path)])


def load_all(extra: list[Path] | None = None) -> list[LoadedTask]:
    return [load_task_folder(p) for _, p in sorted(_candidates(task_dirs(extra)).items())]


def load_all_reporting(extra: list[Path] | None = None) -> tuple[list[LoadedTask], list[TaskError]]:
    """Every task that loads, and an error for each one that does not (the others are still listed)."""
    good: list[LoadedTask] = []
    bad: list[TaskError] = []
    for _, p in sorted(_candidates(task_dirs(extra)).items()):
        try:
            good.append(load_task_folder(p))
        except TaskError as exc:
            bad.append(exc)
    return good, bad
