"""What a GPU slot that lives in another process runs: the jobs of measure/gpu_pool.py, on an evaluator built there.

A slot of this machine (measure/process_slots.py) and a Ray actor (measure/ray_slots.py) both run their GPU's
evaluator away from the process that drives the runs, so a job crosses a process boundary: the task goes as a
``TaskPayload`` (a built-in task by name, a task of this machine by its folder, a task for another machine as
the files of its folder), the rest of the job's arguments by value. ``SlotServer`` is the far side: it loads each
task once and calls the evaluator. Nothing here imports ray.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel

from cuda_llm.measure.evaluator import Evaluator, GpuEvaluator, run_job
from cuda_llm.tools.harness.eval_options import EvalOptions
from cuda_llm.results import DeviceInfo
from cuda_llm.tasks import load_task
from cuda_llm.tasks.loader import SUITE_DIR, load_task_folder

WORK_ARG = {"evaluate": 2, "profile": 2, "final_check": 2, "head_to_head": 4}    # where the work folder sits after ``loaded``
JOB_TIMEOUT_S = 3 * 3600.0         # a job not answered by then counts as lost (a hung slot process or node)
MAX_TASK_BYTES = 64 << 20
Factory = Callable[[], Evaluator]


class TaskPayload(BaseModel):
    """A task as it travels to a slot: a built-in task's name, a folder this machine's slots read, or the files
    of its folder (for a slot on another machine)."""

    name: str
    key: str
    suite: bool = False
    folder: str = ""                    # a folder on this machine (a local slot loads it where it is)
    folder_name: str = ""
    files: dict[str, bytes] = {}


def task_payload(loaded: Any, *, by_files: bool = True) -> TaskPayload:
    """The payload of ``loaded``: by name for a built-in task; otherwise its folder's files (``by_files``, for
    another machine) or its folder's path (a slot on this machine)."""
    folder = Path(loaded.task.folder).resolve()
    if folder.parent == SUITE_DIR.resolve():
        return TaskPayload(name=loaded.task.name, key=f"suite:{loaded.task.name}", suite=True)
    if not by_files:
        return TaskPayload(name=loaded.task.name, key=f"path:{folder}", folder=str(folder))
    files: dict[str, bytes] = {}
    size = 0
    for p in sorted(folder.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            data = p.read_bytes()
            size += len(data)
            if size > MAX_TASK_BYTES:
                raise ValueError(f"task folder {folder} holds more than {MAX_TASK_BYTES >> 20} MiB; a task sent to "
                                 "Ray nodes must be small (or on a file system every node sees)")
            files[p.relative_to(folder).as_posix()] = data
    key = hashlib.sha256(b"".join(k.encode() + b"\0" + v for k, v in files.items())).hexdigest()[:16]
    return TaskPayload(name=loaded.task.name, key=key, folder_name=folder.name, files=files)


class Payloads:
    """The payload of each task a slot was handed, made once per task folder (``by_files``: see task_payload)."""

    def __init__(self, *, by_files: bool):
        self.by_files = by_files
        self._made: dict[str, TaskPayload] = {}

    def of(self, loaded: Any) -> TaskPayload:
        key = str(Path(loaded.task.folder).resolve())
        if key not in self._made:
            self._made[key] = task_payload(loaded, by_files=self.by_files)
        return self._made[key]


def device_of(info: dict[str, Any]) -> Any:
    """The DeviceInfo in a slot's ``describe()`` answer (None where its evaluator has no device)."""
    return DeviceInfo.model_validate(info["device"]) if info.get("device") else None


class GpuEvaluatorFactory:
    """The real evaluator in a slot's process: GpuEvaluator on GPU ``gpu`` (an index among the GPUs that process
    sees; a Ray actor sees only its own, so 0). Picklable."""

    def __init__(self, options: EvalOptions | None = None, profile: bool = True, gpu: int = 0):
        self.options, self.profile, self.gpu = options, profile, gpu    # passed whole to the evaluator

    def __call__(self) -> Any:
        return GpuEvaluator(options=self.options, profile=self.profile, gpu=self.gpu)


class SlotServer:
    """The far side of a slot: the evaluator ``factory`` builds, the tasks it was sent, and its own work folders
    (``own_work``: a job's work folder is made here, for a slot whose caller's paths mean nothing)."""

    def __init__(self, factory: Factory, *, own_work: bool = False):
        self.evaluator = factory()
        self.tasks: dict[str, Any] = {}
        self.own_work = own_work
        self.root = Path(tempfile.mkdtemp(prefix="cuda-llm-slot-")) if own_work else None

    def describe(self) -> dict[str, Any]:
        """The evaluator's architecture and device facts (JSON), which the pool checks are all one model."""
        device = self.evaluator.device
        return {"arch": self.evaluator.arch,
                "device": device.model_dump(mode="json") if device is not None else None}

    def load(self, task: TaskPayload) -> Any:
        if task.key not in self.tasks:
            if task.suite:
                self.tasks[task.key] = load_task(task.name)
            elif task.folder:
                self.tasks[task.key] = load_task_folder(Path(task.folder))
            else:
                root = self.root or Path(tempfile.mkdtemp(prefix="cuda-llm-slot-"))
                folder = root / "tasks" / task.key / (task.folder_name or task.name)
                for rel, data in task.files.items():
                    path = folder / rel
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data)
                self.tasks[task.key] = load_task_folder(folder)
        return self.tasks[task.key]

    def run(self, kind: str, task: TaskPayload, args: tuple[Any, ...]) -> Any:
        loaded = self.load(task)
        rest = list(args)
        at = WORK_ARG.get(kind)
        if self.own_work and at is not None and self.root is not None:
            rest[at] = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=self.root))
        return run_job(self.evaluator, kind, (loaded, *rest))

    def close(self) -> None:
        self.evaluator.close()
