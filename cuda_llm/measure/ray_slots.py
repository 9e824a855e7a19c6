"""The GPU pool over a Ray cluster: one actor per GPU (``num_gpus=1``), each a slot of measure/gpu_pool.py.

The only module that imports ray (the optional extra ``ray``: ``pip install -e '.[gpu,ray]'`` on every node).
Each actor builds an evaluator on its node (by default ``GpuEvaluator(gpu=0)``: Ray sets the actor's
``CUDA_VISIBLE_DEVICES`` to the GPU it was given, so GPU 0 is that one and the node's per-GPU lock file is
that GPU's), and runs the pool's jobs with it: the candidate runs in a child process on that node, exactly
as on this machine, and is judged by the actor, outside it. Tasks travel by value: a built-in task by name,
any other as the files of its folder, written once per actor into a folder of its own.

Back-pressure: the pool gives each actor one job at a time and keeps the rest in its own queue, so nothing
piles up in Ray. A job whose actor or node is lost (``RayActorError``, or no answer within the job's time
limit) is re-queued by the pool once, for another actor; Ray restarts the lost actor (``max_restarts``)
where a GPU is free. Ray's own task retries are off, so a job is never run twice behind the pool's back: the
one result the pool delivers is the one that counts.

The driver (the machine running ``cuda-llm batch --ray``) compiles the coders' candidates for their
compile-fix turns, so it needs nvcc but no GPU; pass ``--arch`` if the cluster's GPUs are not the driver's.
"""

from __future__ import annotations

from typing import Any

import ray

from cuda_llm.measure.evaluator import ToolsMixin
from cuda_llm.measure.gpu_pool import GpuPool, same_kind
from cuda_llm.measure.slot_server import (JOB_TIMEOUT_S, WORK_ARG, Factory, GpuEvaluatorFactory, Payloads, SlotServer,
                                        TaskPayload, device_of, task_payload)
from cuda_llm.results import DeviceInfo
from cuda_llm.tools.harness.eval_options import EvalOptions
from cuda_llm.tools.compiler.compile import normalize_arch

__all__ = ["EvaluatorActor", "GpuEvaluatorFactory", "RayPool", "RaySlot", "TaskPayload", "ray_pool", "task_payload"]


@ray.remote(num_gpus=1, max_restarts=3, max_task_retries=0)
class EvaluatorActor:
    """One GPU of the cluster: a SlotServer (measure/slot_server.py) on its node, running one job at a time in
    work folders of its own."""

    def __init__(self, factory: Factory):
        self.server = SlotServer(factory, own_work=True)

    def where(self) -> dict[str, Any]:
        import os

        gpu = ",".join(str(g) for g in ray.get_gpu_ids()) or os.environ.get("CUDA_VISIBLE_DEVICES", "?")
        return {"label": f"{ray.util.get_node_ip_address()}/gpu{gpu}", **self.server.describe()}

    def run(self, kind: str, task: TaskPayload, args: tuple[Any, ...]) -> Any:
        return self.server.run(kind, task, args)


class RaySlot:
    """A pool slot backed by one actor (see the module docstring)."""

    def __init__(self, actor: Any, label: str, timeout_s: float = JOB_TIMEOUT_S):
        self.actor = actor
        self.label = label
        self.timeout_s = timeout_s
        self._payloads = Payloads(by_files=True)       # another machine: a task folder travels as its files

    def run(self, kind: str, args: tuple[Any, ...]) -> Any:
        loaded, rest = args[0], list(args[1:])
        at = WORK_ARG.get(kind)
        if at is not None:
            rest[at] = None                       # the node's own folder (this machine's paths mean nothing there)
        ref = self.actor.run.remote(kind, self._payloads.of(loaded), tuple(rest))
        return ray.get(ref, timeout=self.timeout_s)   # RayActorError / GetTimeoutError: the pool re-queues

    def close(self) -> None:
        try:
            ray.kill(self.actor)
        except Exception:  # noqa: BLE001
            pass


class DriverTools(ToolsMixin):
    """Builds, analyses and the toolchain on the driver (nvcc here; no GPU needed)."""

    def __init__(self, arch: str, device: DeviceInfo | None):
        self.arch, self.device = arch, device


class RayPool(GpuPool):
    """A GpuPool whose slots are Ray actors; closing it also leaves the cluster if this process joined it."""

    def __init__(self, *args: Any, owns_ray: bool = False, **kw: Any):
        super().__init__(*args, **kw)
        self.owns_ray = owns_ray

    def close(self) -> None:
        super().close()
        if self.owns_ray and ray.is_initialized():
            ray.shutdown()


def ray_pool(address: str | None, *, factory: Factory | None = None, options: EvalOptions | None = None,
             profile: bool = True, actors: int | None = None,
             init: dict[str, Any] | None = None, start_timeout_s: float = 900.0) -> RayPool:
    """Join the cluster at ``address`` (``auto``, ``ray://host:10001``, ``host:6379``; ``local`` or None starts
    one on this machine) and start one evaluator actor per GPU it has (or ``actors``), each measuring with
    ``options`` (EvalOptions, passed whole) unless a ``factory`` says otherwise."""
    owns = False
    if not ray.is_initialized():
        kw = dict(init or {})
        kw.setdefault("log_to_driver", False)
        kw.setdefault("include_dashboard", False)
        ray.init(address=None if address in (None, "local") else address, **kw)
        owns = True
    n = actors if actors is not None else int(ray.cluster_resources().get("GPU", 0))
    if n < 1:
        if owns:
            ray.shutdown()
        raise ValueError(f"the Ray cluster at {address or 'local'} has no GPU; start its nodes with GPUs "
                         "(`ray start --head --num-gpus N` / `ray start --address HEAD:6379`)")
    factory = factory or GpuEvaluatorFactory(options, profile=profile)
    handles = [EvaluatorActor.remote(factory) for _ in range(n)]
    try:
        infos = ray.get([h.where.remote() for h in handles], timeout=start_timeout_s)
    except Exception:
        for h in handles:
            ray.kill(h)
        if owns:
            ray.shutdown()
        raise
    devices = [device_of(i) for i in infos]
    same_kind([(i["label"], d) for i, d in zip(infos, devices)])
    labels = [i["label"] for i in infos]
    labels = [lb if labels.count(lb) == 1 else f"{lb}#{k}" for k, lb in enumerate(labels)]
    slots = [RaySlot(h, lb) for h, lb in zip(handles, labels)]
    first_arch = (options.arch if options is not None else None) or infos[0].get("arch") or "sm_90"

    first_arch = normalize_arch(first_arch)
    return RayPool(slots, arch=first_arch, device=devices[0], tools=DriverTools(first_arch, devices[0]),
                   owns_ray=owns)
