"""The task and kernel-file arguments that `eval`, `tune` and `profile` take: one loader and one set of
error messages for the three, each saying what to pass instead."""

from __future__ import annotations

from pathlib import Path

from cuda_llm.tasks import TaskError, list_task_names, load_task
from cuda_llm.tasks.loader import LoadedTask


class ArgumentProblem(ValueError):
    """A task or kernel argument the command cannot use (the command prints it and exits 2)."""


def load_task_argument(task: str, tasks_dir: list[Path] | None = None) -> LoadedTask:
    try:
        return load_task(task, tasks_dir)
    except TaskError as exc:
        raise ArgumentProblem(f"{str(exc).rstrip('.')}. List the tasks with `cuda-llm tasks`.") from exc
    except (OSError, ValueError, KeyError) as exc:
        known = ", ".join(list_task_names(tasks_dir))
        raise ArgumentProblem(f"cannot load task {task!r}: {exc}. Known tasks: {known}") from exc


def read_kernel_argument(kernel: Path, loaded: LoadedTask, *, refuse_empty: bool = False) -> str:
    """The kernel file's text. ``refuse_empty``: an empty file is an argument problem (for commands that
    would otherwise report on nothing), not a candidate for the static checks."""
    if not kernel.is_file():
        what = "is a folder" if kernel.is_dir() else "does not exist (no such file)"
        raise ArgumentProblem(f"{kernel} {what}; pass the path of a .cu file that defines {loaded.task.signature}")
    try:
        source = kernel.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ArgumentProblem(f"cannot read {kernel}: {exc}") from exc
    if refuse_empty and not source.strip():
        raise ArgumentProblem(f"{kernel} is empty; pass a .cu file that defines {loaded.task.signature}")
    return source
